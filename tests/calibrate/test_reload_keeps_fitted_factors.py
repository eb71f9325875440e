"""A calibration file read back applies the factors its fit gave: one rule (``fit.fitted_classes``) says which those
are, for the fit and for ``store.from_toml`` alike.

Before: ``fit_time`` also fitted ``launch`` when a run measured less than its host's side alone allows (only a
faster issue reproduces such a run), but ``from_toml`` kept only factors whose class carried 5% of some run. A
GPU-bound run hides its wait for the host (0.2% of a llama-125m step on an H100), so the ``launch`` factor was
dropped on reload: a run of 15 ms calibrated to 15 ms when fitted and to 18.9 ms (its shipped issue time) once
``estimate`` read the file.
"""

from __future__ import annotations

import pytest

from gpuwise.calibrate.apply import corrected_time
from gpuwise.calibrate.fit import LAUNCH, fit_gpu, fitted_classes
from gpuwise.calibrate.store import load, save
from gpuwise.catalog import load_catalog, resolve_gpu
from tests.calibrate.test_offloaded_cpu_optimizer_fit import _row, _step


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def test_a_run_faster_than_its_host_side_keeps_its_launch_factor_through_the_file(h100, tmp_path):
    step = _step(h100)
    assert step.by_class_s[LAUNCH] < 0.05 * step.step_time_s       # the wait for the host: no share of its own
    measured_s = 0.8 * step.host_s                                   # faster than the shipped issue time alone
    row = _row(step, h100, measured_s)
    fitted = fit_gpu("h100-sxm", [row])
    assert LAUNCH in fitted.class_factors

    read = load(save({"h100-sxm": fitted}, tmp_path / "calibration.toml"))["h100-sxm"]

    assert read.class_factors == fitted.class_factors
    before_s = corrected_time(step, fitted, "bf16", h100).step_time_s
    assert before_s == pytest.approx(measured_s, rel=0.01)
    assert corrected_time(step, read, "bf16", h100).step_time_s == pytest.approx(before_s, rel=1e-9)


def test_the_factors_a_fit_gives_are_those_fitted_classes_names(h100):
    step = _step(h100)
    for measured_s in (0.8 * step.host_s, 1.2 * step.step_time_s):   # faster than the host side; GPU-bound, slower
        cal = fit_gpu("h100-sxm", [_row(step, h100, measured_s)])
        assert set(cal.class_factors) == fitted_classes(cal.runs), measured_s
