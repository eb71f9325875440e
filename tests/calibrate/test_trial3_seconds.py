"""A step time of a second or more is said in seconds where calibrate lists its runs and warns.

Before: ``fit.duration_text`` printed milliseconds up to 10 s with three significant digits, so an offloaded LLM
run of 1.0 s a step was listed as "measured 1e+03 ms, calibrated 1e+03 ms (±0%), shipped 1.65e+03 ms".
"""

from __future__ import annotations

import pytest

from gpuwise.calibrate.explain import describe_runs
from gpuwise.calibrate.fit import FitRow, duration_text, fit_gpu


@pytest.mark.parametrize("seconds, text", [(0.031, "31 ms"), (1e-6, "0.001 ms"), (0.9994, "999 ms"),
                                           (0.9996, "1 s"), (1.0, "1 s"), (1.65, "1.65 s"), (15.0, "15 s")])
def test_a_step_time_is_said_in_milliseconds_under_a_second_and_in_seconds_from_it(seconds, text):
    assert duration_text(seconds) == text


def test_calibrate_lists_a_run_of_seconds_a_step_in_seconds():
    row = FitRow(fingerprint="a1b2c3d4", predicted_by_class_s={"matmul/bf16": 1.65}, predicted_other_s=0.0,
                 measured_step_time_s=2.0, predicted_host_s=0.01)
    [line] = describe_runs(fit_gpu("rtx-4090", [row]))
    assert "measured 2 s, calibrated 2 s (±0%), shipped 1.65 s" in line
    assert "e+" not in line
