"""A step time is checked by one rule wherever it is read (``calibrate.ranges``): a run log's, an exported row's, a
measure.py row's (its median and each of its timed steps) and a stored run's, each refusal naming the source and
the key as before.

Before: the check was written three times (``store._number``, ``learn.check_step_times``, ``export.checked_figures``),
each in words of its own ("= 0.0 is not a finite number > 0", "-0.031 at step 8 is not positive", "nan is not a
positive number"), and a negative or NaN step among a measure.py row's ``step_times_s`` went unchecked.
"""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
import tomli_w

from gpuwise.calibrate import CalibrateError, fit, read_measurements
from gpuwise.calibrate.calibration import GpuCalibration
from gpuwise.calibrate.evidence import fitted_classes
from gpuwise.calibrate.ranges import step_time_s
from gpuwise.calibrate.step import FitRow, compose
from gpuwise.calibrate.store import load
from tests.calibrate.helpers import synthetic_log, write_model
from tests.calibrate.test_trial4_measure_json_like_a_run_log import GPU, OK, measure_file

# values a step time must not be, each refused by every reader
NOT_STEP_TIMES = ["0.05", True, 0, -0.031, math.nan, math.inf]


def _said(value: object, name: str) -> str:
    """What the one rule says of ``value`` read under ``name``."""
    with pytest.raises(ValueError) as said:
        step_time_s(value, name)
    return str(said.value)


@pytest.mark.parametrize("value", NOT_STEP_TIMES)
def test_a_measure_row_s_median_is_refused_by_the_one_step_time_rule(tmp_path, value):
    with pytest.raises(CalibrateError) as refused:
        read_measurements(measure_file(tmp_path, [{**OK, "median_step_time_s": value}]))
    assert str(refused.value).endswith(f"[r18]: {_said(value, 'median_step_time_s')}")


@pytest.mark.parametrize("value", NOT_STEP_TIMES)
def test_each_of_a_measure_row_s_step_times_is_a_step_time(tmp_path, value):
    # was: only the median was checked; a negative or NaN step among the timed ones went through
    times = [0.05, 0.05, value, 0.05]
    with pytest.raises(CalibrateError) as refused:
        read_measurements(measure_file(tmp_path, [{**OK, "step_times_s": times}]))
    assert str(refused.value).endswith(f"[r18]: {_said(value, 'step_times_s[2]')}")


@pytest.mark.parametrize("value", NOT_STEP_TIMES)
def test_an_exported_row_s_step_time_is_refused_by_the_one_step_time_rule(tmp_path, value):
    row = {"format": "gpuwise-measurement/1", "gpu": "h100-sxm", "gpu_name": GPU["name"], "stack": {},
           "workload": OK["workload"], "figures": {"step_time_s": value, "timed_steps": 10}}
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps(row) + "\n")
    with pytest.raises(CalibrateError) as refused:
        read_measurements(p)
    assert str(refused.value) == (f"{p}:1: not a gpuwise-measurement/1 row "
                                  f"({_said(value, 'step_time_s')})")


@pytest.mark.parametrize("value", [-0.031, 0.0, math.inf])
def test_a_run_log_s_step_time_is_refused_by_the_one_step_time_rule(tmp_path, value):
    log = synthetic_log(tmp_path / "run.db", step_time_s=0.004,
                        workload={"model": write_model(tmp_path), "batch_size": 16, "precision": "fp32",
                                  "optimizer": "adamw"})
    with sqlite3.connect(log) as db:
        db.execute("UPDATE train_metrics SET value = ? WHERE name = 'step_time_s' AND step = 8", (value,))
    with pytest.raises(CalibrateError) as refused:
        read_measurements(log)
    assert str(refused.value) == (f"{log}: {_said(value, 'step_time_s')} at step 8: not a step's wall time (the "
                                  "guard writes those); fix or drop the log")


@pytest.mark.parametrize("value", NOT_STEP_TIMES)
def test_a_stored_run_s_step_time_is_refused_by_the_one_step_time_rule(tmp_path, value):
    run = {"fingerprint": "74c7a2572faadb18", "predicted_by_class_s": {"matmul/tf32": 0.02}, "predicted_other_s": 0.0,
           "measured_step_time_s": value}
    doc = {"format_version": 2, "gpu": {"h100-sxm": {"label": "x", "fitted": "2026-12-07", "global_factor": 1.0,
                                                     "class_factors": {}, "host_s": 0.0, "run": [run]}}}
    p = tmp_path / "calibration.toml"
    p.write_text(tomli_w.dumps(doc))
    with pytest.raises(CalibrateError) as refused:
        load(p)
    assert f"({_said(value, 'gpu.h100-sxm.run[1].measured_step_time_s')})" in str(refused.value)


def test_the_fit_s_parts_stay_importable_from_fit_as_the_same_objects():
    # fit.py was split along its seams (step, evidence, calibration); benchmarks/ and tests import from fit
    assert (fit.FitRow, fit.compose, fit.GpuCalibration, fit.fitted_classes) == (FitRow, compose, GpuCalibration,
                                                                                 fitted_classes)
    assert all(hasattr(fit, name) for name in fit.__all__)
