"""Calibration is an argument of the planner, never a process-wide global (issue 23 item 5): two models
with different calibrations, used in turn in one process, each keep their own answer."""

from __future__ import annotations

import pytest

from gpuwise.calibrate.apply import correction
from gpuwise.calibrate.fit import FitRow, class_key, fit_gpu
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import model_for, step_time_function
from gpuwise.workload import Workload

GPU = resolve_gpu(load_catalog(user_file=False), "rtx-4090")
JOB = Workload(model="torchvision:resnet18", batch_size=4, image_size=64, optimizer="sgd")


def _calibration(shipped, slower: float):
    """What one run ``slower`` times the shipped prediction teaches: the real fit, the real correction."""
    by_class = {class_key(c, JOB.precision, GPU): s for c, s in shipped.time.by_class_s.items()}
    other = shipped.time.step_time_s - sum(by_class.values())
    row = FitRow(f"run-{slower}", by_class, max(0.0, other), slower * shipped.time.step_time_s)
    return correction({GPU.id: fit_gpu(GPU.id, [row])})


def test_two_calibrations_in_one_process_give_their_own_answers():
    none = model_for(JOB)
    shipped = none.estimate(GPU)
    twice, thrice = _calibration(shipped, 2.0), _calibration(shipped, 3.0)
    a, b = model_for(JOB, correction=twice), model_for(JOB, correction=thrice)
    for _ in range(2):            # interleaved: nothing one sets leaks into the next
        ta, tb, t0 = (m.estimate(GPU).time.step_time_s for m in (a, b, none))
        assert t0 == pytest.approx(shipped.time.step_time_s)
        assert ta == pytest.approx(2.0 * t0, rel=0.05) and tb == pytest.approx(3.0 * t0, rel=0.05)
    assert a.estimate(GPU).calibration.startswith("calibrated with 1 of your runs on rtx-4090")
    assert none.estimate(GPU).calibration is None
    # the report's and the advice's time predictor take it the same way
    assert step_time_function(JOB, correction=twice)(GPU) == pytest.approx(ta)
