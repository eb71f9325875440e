"""Trial 8 of the calibration: a run that recorded part of its stack is not a second stack.

Trial 7 grouped runs by the text of the stack they recorded: a run that recorded CUDA 12.4 and no torch version
(a log without the torch record) was "cuda 12.4", another stack than "torch 2.5.1, cuda 12.4", so calibrate warned
of mixed stacks and --json's mixed_stacks suggested --forget for a run of the very same stack. Two stacks differ
only where both recorded a part with another version.
"""

from __future__ import annotations

import json

from gpuwise.calibrate.evidence import stack_groups
from gpuwise.calibrate.step import FitRow
from gpuwise.runlog import RunLog
from tests.calibrate.helpers import synthetic_log

WORKLOAD = {"model": "torchvision:resnet18", "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}


def _run(fingerprint: str, **stack: str) -> FitRow:
    return FitRow(fingerprint=fingerprint, predicted_by_class_s={"conv/fp16": 0.02}, predicted_other_s=0.0,
                  measured_step_time_s=0.02, stack={"driver": "550.54.15", **stack})


def _fingerprints(groups: dict) -> dict[str, list[str]]:
    return {stack: [r.fingerprint for r in runs] for stack, runs in groups.items()}


def test_a_run_without_its_torch_version_joins_the_stack_it_does_not_contradict():
    runs = [_run("a", torch="2.5.1", cuda="12.4"), _run("b", cuda="12.4"), _run("c", torch="2.5.1")]
    assert _fingerprints(stack_groups(runs)) == {"torch 2.5.1, cuda 12.4": ["a", "b", "c"]}


def test_runs_that_recorded_another_version_of_one_part_are_two_stacks():
    runs = [_run("a", torch="2.5.1", cuda="12.4"), _run("b", cuda="12.4"), _run("c", torch="2.7.0", cuda="12.4")]
    # "b" recorded too little to tell which of the two it measured: in neither
    assert _fingerprints(stack_groups(runs)) == {"torch 2.5.1, cuda 12.4": ["a"], "torch 2.7.0, cuda 12.4": ["c"]}


def test_a_partial_run_first_is_grouped_with_the_full_record_of_its_stack():
    runs = [_run("a", cuda="12.4"), _run("b", torch="2.5.1", cuda="12.4"), _run("c", torch="2.5.1", cuda="12.6")]
    assert _fingerprints(stack_groups(runs)) == {"torch 2.5.1, cuda 12.4": ["a", "b"], "torch 2.5.1, cuda 12.6": ["c"]}


def test_calibrate_says_nothing_of_stacks_for_a_run_without_its_torch_record(gpuwise, tmp_path):
    full = synthetic_log(tmp_path / "full.db", workload=WORKLOAD, step_time_s=0.031)
    partial = synthetic_log(tmp_path / "partial.db", workload=WORKLOAD, step_time_s=0.030)
    with RunLog(partial) as log:
        log.set_meta("torch_version", "")            # not recorded
    assert gpuwise("calibrate", full).returncode == 0
    r = gpuwise("calibrate", partial, "--json")
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)["calibration"]
    assert len(cal["run_fingerprints"]) == 2
    assert cal["mixed_stacks"] == {}
    assert "stacks" not in r.stderr
