"""A restart with more ranks than the checkpoint holds random states for (15 steps with plain python, then
torchrun with 2): rank 0 says so, and each new rank seeds its generators from rank 0's saved state and its rank,
deterministically, instead of silently drawing rank 0's numbers (the same dropout masks on every rank)."""

from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from gpuwise.guard import CheckpointStore
from gpuwise.guard.rng import restore_rng, snapshot_rng

from .helpers import PYTHON, example_env

JOB = str(Path(__file__).with_name("grown_world_job.py"))


@pytest.mark.slow
def test_a_rank_without_saved_random_state_is_told_and_seeded_apart_from_rank_0(tmp_path, zygote):
    ckpt = tmp_path / "ckpt"
    zygote.start([str(ckpt), "1"], tmp_path / "first.out", tmp_path / "first.err", script=Path(JOB))
    assert zygote.wait() == 0, (tmp_path / "first.err").read_text()
    ranks = [subprocess.Popen([PYTHON, JOB, str(ckpt), "2", str(rank), str(tmp_path / "init")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=example_env())
             for rank in (0, 1)]
    done = [(*p.communicate(timeout=300), p.returncode) for p in ranks]
    for out, err, code in done:
        assert code == 0, err
    draws = [json.loads(re.search(r"draws=(.*)", out).group(1)) for out, _, _ in done]

    said = ("the checkpoint holds the random generators of 1 rank(s), this run has 2 (world size grew): rank(s) 1 "
            "seed theirs from rank 0's saved state and their rank")
    assert said in done[0][1] and said not in done[1][1]  # rank 0 says it, once
    assert draws[0] != draws[1]  # not rank 0's masks

    # rank 0 drew on from its own saved state; rank 1 from the seed derived from it: the same on every resume
    from gpuwise.guard.rng import seed_rng_for_rank  # (here: the checks above fail without it, not the import)

    ckpt_state = CheckpointStore(ckpt).load_state(CheckpointStore(ckpt).latest()[0])
    before = snapshot_rng()
    try:
        seed_rng_for_rank(ckpt_state["rng"][0], 1)
        assert draws[1] == [torch.rand(2).tolist(), float(np.random.rand()), random.random()]
    finally:
        restore_rng(before)
