"""Trial 7 of the calibration: runs of one GPU measured under two torch versions are fitted together, and said so.

A user who upgraded torch and calibrated a run of the new stack beside the old runs got a fit halfway between the
two (ResNet-18 at 31 ms under torch 2.5.1 and 26 ms under 2.7.0: ×1.49, 28 ms) and no word that the old runs
measured a stack no longer in use: 16% apart is within what two runs of one job may differ by, so nothing warned.
"""

from __future__ import annotations

import json

from gpuwise.runlog import RunLog
from tests.calibrate.helpers import synthetic_log

WORKLOAD = {"model": "torchvision:resnet18", "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}


def _log(path, step_time_s: float, torch_version: str):
    synthetic_log(path, workload=WORKLOAD, step_time_s=step_time_s)
    with RunLog(path) as log:
        log.set_meta("torch_version", torch_version)
    return path


def test_runs_of_two_torch_versions_are_named_with_their_fingerprints(gpuwise, tmp_path):
    assert gpuwise("calibrate", _log(tmp_path / "old.db", 0.031, "2.5.1")).returncode == 0
    r = gpuwise("calibrate", _log(tmp_path / "new.db", 0.026, "2.7.0"), "--json")
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)["calibration"]
    old_fp, new_fp = cal["run_fingerprints"]
    assert cal["mixed_stacks"] == {"torch 2.5.1, cuda 12.4": [old_fp], "torch 2.7.0, cuda 12.4": [new_fp]}
    warned = [line for line in r.stderr.splitlines() if "stacks" in line]
    assert len(warned) == 1 and old_fp in warned[0] and new_fp in warned[0] and "--forget" in warned[0]

    shown = gpuwise("calibrate")
    assert "2 stacks (torch 2.5.1, cuda 12.4; torch 2.7.0, cuda 12.4)" in " ".join(shown.stdout.split())


def test_runs_of_one_stack_say_nothing_of_stacks(gpuwise, tmp_path):
    assert gpuwise("calibrate", _log(tmp_path / "a.db", 0.031, "2.5.1")).returncode == 0
    r = gpuwise("calibrate", _log(tmp_path / "b.db", 0.030, "2.5.1"), "--json")
    assert json.loads(r.stdout)["calibration"]["mixed_stacks"] == {}
    assert "stacks" not in r.stderr
