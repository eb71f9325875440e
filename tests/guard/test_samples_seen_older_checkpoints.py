"""Checkpoints of earlier gpuwise (state ``format_version`` 1) stored ``samples_seen`` as rank 0's count; a resume
reads it as the job's (every rank's) count: times the world size the checkpoint saved. A checkpoint of this gpuwise
(format 2) already holds the job's count and is read as it is, whatever its world size."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from gpuwise.guard import Guard
from gpuwise.guard.checkpoint import CheckpointStore

from .helpers import tiny_model

SAVED_WORLD_SIZE = 3
SAVED_SAMPLES_SEEN = 25


def _trained_state() -> dict:
    """The state a Guard saves after two steps of 4 samples on one process."""
    model = tiny_model()
    guard = Guard(Path("unused"), model, torch.optim.SGD(model.parameters(), lr=0.1), lock_directory=False,
                  verbose=False)
    for _ in range(2):
        guard.step((torch.randn(4, 8), torch.randint(0, 3, (4,))), lambda b: F.cross_entropy(model(b[0]), b[1]))
    state = guard.state_dict()
    guard.close(save=False)
    return state


def _resumed_samples_seen(directory: Path, format_version: int) -> int:
    """``samples_seen`` of a Guard resumed from a checkpoint of ``format_version`` that a 3-rank run saved."""
    state = _trained_state()
    state["format_version"] = format_version
    state["progress"].update(samples_seen=SAVED_SAMPLES_SEEN, world_size=SAVED_WORLD_SIZE)
    CheckpointStore(directory).save(state, 2, 0, meta={"samples_seen": SAVED_SAMPLES_SEEN},
                                    world_size=SAVED_WORLD_SIZE)
    model = tiny_model()
    guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    assert guard.resume() is not None
    guard.close(save=False)
    return guard.samples_seen


def test_a_checkpoint_of_rank_0s_count_resumes_as_every_ranks_count(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _resumed_samples_seen(tmp_path / "old", 1) == SAVED_SAMPLES_SEEN * SAVED_WORLD_SIZE


def test_a_checkpoint_of_every_ranks_count_resumes_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    current = _trained_state()["format_version"]
    assert current > 1
    assert _resumed_samples_seen(tmp_path / "new", current) == SAVED_SAMPLES_SEEN


def test_a_saved_state_declares_the_format_that_counts_every_rank(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = _trained_state()
    assert state["format_version"] > 1
    assert state["progress"]["samples_seen"] == 2 * 4  # one process: its own samples are the job's
