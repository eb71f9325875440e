"""A calibration carried to the GPUs without one (a new user's trial, defect).

Before: a run 1.5x slower than predicted on an RTX 4090 (the user's stack) calibrated the 4090 alone, so every
comparison across GPUs set the user's stack on the 4090 against the shipped model elsewhere: estimate --gpu all
ranked the cut-down RTX 4090 D at 0.71x the 4090's step time and an RTX A5000 at 0.88x, and the report's
right-sizing halved the savings' denominator. Now a GPU with no calibration of its own carries the step-time
correction of the one with the most runs; memory stays as shipped there.
"""

from __future__ import annotations

import pytest

from gpuwise.calibrate.apply import carried_calibration, correction
from gpuwise.calibrate.fit import FitRow, class_key, fit_gpu
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import model_for
from gpuwise.workload import Workload

SLOWER = 1.5        # the user's stack against the shipped model, on the GPU measured


@pytest.fixture(scope="module")
def setup():
    cat = load_catalog(None)
    gpus = {g: resolve_gpu(cat, g) for g in ("rtx-4090", "rtx-4090d", "rtx-a5000", "a100-40gb-sxm4")}
    w = Workload("torchvision:resnet18", batch_size=64, precision="amp-fp16", optimizer="adamw")
    shipped = model_for(w)
    step = shipped.estimate(gpus["rtx-4090"]).time
    by_class = {class_key(c, w.precision, gpus["rtx-4090"]): s for c, s in step.by_class_s.items()}
    row = FitRow("trial", by_class, step.step_time_s - sum(by_class.values()), SLOWER * step.step_time_s,
                 predicted_host_s=step.host_s)
    cal = fit_gpu("rtx-4090", [row], today="2026-12-06")
    return gpus, shipped, model_for(w, correction=correction({"rtx-4090": cal})), cal


def test_other_gpus_keep_the_shipped_ratios_to_the_gpu_measured(setup):
    gpus, shipped, calibrated, _ = setup
    measured = calibrated.estimate(gpus["rtx-4090"])
    assert measured.time.step_time_s == pytest.approx(SLOWER * shipped.estimate(gpus["rtx-4090"]).time.step_time_s,
                                                      rel=0.01)
    assert measured.calibration_carried_from is None
    for gpu in ("rtx-4090d", "rtx-a5000", "a100-40gb-sxm4"):
        other = calibrated.estimate(gpus[gpu])
        assert other.calibration_carried_from == "rtx-4090"
        assert other.calibration.startswith(f"carried to {gpu}, which none of your runs measured: ")
        ratio = other.time.step_time_s / measured.time.step_time_s
        shipped_ratio = (shipped.estimate(gpus[gpu]).time.step_time_s
                         / shipped.estimate(gpus["rtx-4090"]).time.step_time_s)
        # one run scales every class alike: the carried ratio is the shipped one (was shipped / 1.5)
        assert ratio == pytest.approx(shipped_ratio, rel=0.03)
    # a cut-down 4090 is never predicted faster than the 4090 the runs measured
    assert calibrated.estimate(gpus["rtx-4090d"]).time.step_time_s >= measured.time.step_time_s


def test_memory_is_not_carried(setup):
    gpus, shipped, calibrated, _ = setup
    assert calibrated.estimate(gpus["rtx-a5000"]).memory == shipped.estimate(gpus["rtx-a5000"]).memory


def test_the_calibration_carried_is_the_one_with_the_most_runs_whatever_the_order(setup):
    *_, cal = setup
    rows = [FitRow(str(i), {"matmul/fp16": 0.01}, 0.0, 0.02) for i in range(3)]
    more = fit_gpu("a100-40gb-sxm4", rows, today="2026-01-01")
    assert carried_calibration({"rtx-4090": cal, "a100-40gb-sxm4": more}) is more
    assert carried_calibration({"a100-40gb-sxm4": more, "rtx-4090": cal}) is more
    newer = fit_gpu("rtx-a5000", rows[:1], today="2026-12-07")
    assert carried_calibration({"rtx-4090": cal, "rtx-a5000": newer}) is newer     # one run each: the newest fit
    assert carried_calibration({}) is None and correction({}) is None
