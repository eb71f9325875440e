"""The guard's workload= in the run log: checked by the one reader (Workload.from_dict), and never written over a
workload the log already holds (`gpuwise run --model … -- python train.py` around a guarded script writes the same
log first): the first stays, and a different one is warned about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from gpuwise.guard import Guard, GuardError
from gpuwise.runlog import RunLog, read_meta
from gpuwise.workload import Workload

JOB = textwrap.dedent("""
    import sys

    import torch
    from gpuwise.guard import Guard

    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    workload = {"model": "torchvision:resnet18", "batch_size": 32}
    Guard(sys.argv[2], model, opt, run_log=sys.argv[1], workload=workload, verbose=False).close()
""")


def _guard(tmp_path, run_log, workload):
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return Guard(tmp_path / "ck", model, opt, run_log=run_log, workload=workload, verbose=False)


def _workload(path) -> dict:
    return json.loads(read_meta(path)["workload"])


def test_gpuwise_runs_workload_stays_and_the_guards_other_one_is_warned_about(tmp_path):
    log = tmp_path / "run.db"
    job = tmp_path / "train.py"
    job.write_text(JOB)
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "run", "--log", str(log), "--model",
                        "torchvision:resnet18", "--batch-size", "64", "--", sys.executable, str(job), str(log),
                        str(tmp_path / "ck")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "GPUWISE_CONFIG_DIR": str(tmp_path / "cfg")})
    assert r.returncode == 0, r.stderr
    assert _workload(log)["batch_size"] == 64                 # was: 32, the guard's, silently
    [warning] = [line for line in r.stderr.splitlines() if "holds a workload already" in line]
    assert "batch_size 64 there, 32 here" in warning and "keeps the first" in warning


def test_the_same_workload_again_is_kept_without_a_word(tmp_path, caplog):
    log = tmp_path / "run.db"
    with RunLog(log) as runlog:
        runlog.set_meta("workload", Workload("torchvision:resnet18", batch_size=32).to_dict())
    with caplog.at_level("WARNING", logger="gpuwise"):
        _guard(tmp_path, log, {"model": "torchvision:resnet18", "batch_size": 32}).close()
    assert not [r for r in caplog.records if "holds a workload" in r.getMessage()]
    assert _workload(log)["batch_size"] == 32


@pytest.mark.parametrize("bad", [{"model": "torchvision:resnet18", "batch_size": "lots"},
                                 {"model": "torchvision:resnet18", "precision": "fp12"},
                                 {"batch_size": 32}])
def test_a_workload_the_reader_refuses_is_refused_by_the_guard_and_not_recorded(tmp_path, bad):
    log = tmp_path / "run.db"
    with pytest.raises(GuardError, match="not a gpuwise workload"):
        _guard(tmp_path, log, bad)
    assert not log.exists() or "workload" not in read_meta(log)
