"""report's predicted-vs-measured says whether the run's step time fell inside the range the shipped model's
measured error gives (runtime/accuracy.py), and points to calibrate."""

from __future__ import annotations

import dataclasses

from gpuwise.report.predicted_vs_measured import Figure, PredictedVsMeasured, comparison_lines
from gpuwise.runtime.accuracy import load_accuracy


def _comparison(predicted_s: float, measured_s: float, calibration: str | None = None) -> PredictedVsMeasured:
    return PredictedVsMeasured("rtx-4090", {"model": "torchvision:resnet18"}, calibration,
                               (Figure("step time", "s", predicted_s, measured_s),))


def test_inside_and_outside_the_held_out_range_are_told_apart():
    lo, hi = load_accuracy().likely_range_s(0.1)
    inside = _comparison(0.1, (lo + hi) / 2)
    outside = _comparison(0.1, hi * 2)
    assert tuple(inside.to_dict()["likely_step_time_range_s"]) == (lo, hi)
    assert any("measured time within the likely" in line for line in comparison_lines(inside))
    lines = comparison_lines(outside)
    assert any("measured time outside the likely" in line for line in lines) and any("gpuwise calibrate" in x for x in lines)
    assert all(len(line) <= 80 for line in lines if "likely" in line or "calibrate" in line)


def test_a_calibrated_closed_form_or_input_bound_prediction_is_not_judged_by_the_shipped_models_range():
    calibrated = _comparison(0.1, 0.5, calibration="calibrated with 3 of your runs on rtx-4090")
    closed_form = dataclasses.replace(_comparison(0.1, 0.5), method="closed-form")
    input_bound = dataclasses.replace(_comparison(0.1, 0.5), bound="input")
    for c in (calibrated, closed_form, input_bound):
        assert c.likely_step_time_range_s() is None
        assert not any("held-out runs" in line for line in comparison_lines(c))
