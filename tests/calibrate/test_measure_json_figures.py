"""A measure.py JSON whose figures are out of their range is refused in one line (exit 2), as an exported row's are
(``export.checked_figures``, the one check of both), naming the workload and the key as measure.py writes it.

Before: its figures went into the fit unchecked: a median step time of "0.05" (a string) or a process memory of
"lots" ended the command in a TypeError traceback (exit 1), a NaN median in scipy's "Residuals are not finite",
a step_times_s that is no list in "object of type 'int' has no len()", and a negative median was said to be under
the job's floor on the GPU rather than not a step time at all.
"""

from __future__ import annotations

import json

import pytest

from gpuwise.calibrate import read_measurements

from tests.calibrate.helpers import GIB, MEASURED_GPU as GPU, MEASURED_ROW as OK


@pytest.mark.parametrize("key, value, said", [
    ("median_step_time_s", "0.05", "median_step_time_s '0.05' is not a number"),
    ("median_step_time_s", float("nan"), "median_step_time_s nan is not finite"),
    ("median_step_time_s", -0.05, "median_step_time_s -0.05 is not positive"),
    ("median_step_time_s", True, "median_step_time_s 'True' is not a number"),
    ("nvml_process_bytes", "lots", "nvml_process_bytes 'lots' is not a whole number >= 0"),
    ("max_memory_reserved_bytes", 1.5 * GIB, "max_memory_reserved_bytes 1610612736.0 is not a whole number >= 0"),
    ("step_times_s", 5, "step_times_s '5' is not a list of step times"),
])
def test_a_measure_json_figure_out_of_its_range_is_refused_in_one_line(gpuwise, config_dir, tmp_path, key, value,
                                                                       said):
    p = tmp_path / "nvidia-h100.json"
    p.write_text(json.dumps({"gpu": GPU, "results": [{**OK, key: value}]}))
    r = gpuwise("calibrate", p)
    assert r.returncode == 2
    assert r.stderr.strip() == f"gpuwise: error: {p} [r18]: {said}"
    assert not (config_dir / "calibration.toml").exists()


def test_an_exported_row_s_step_time_is_checked_by_the_same_rule(gpuwise, config_dir, tmp_path):
    row = {"format": "gpuwise-measurement/1", "gpu": "h100-sxm", "gpu_name": GPU["name"], "stack": {},
           "workload": OK["workload"], "figures": {"step_time_s": float("inf"), "timed_steps": 10}}
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps(row) + "\n")
    r = gpuwise("calibrate", p)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"gpuwise: error: {p}:1: not a gpuwise-measurement/1 row (step_time_s inf is not "
                                "finite)")


def test_the_workloads_measure_py_did_not_measure_are_said_not_dropped_silently(tmp_path, caplog):
    """Before: an OOM or a spent time budget left a workload out without a word ("calibrated with 2 of your runs" of
    a file of 3)."""
    p = tmp_path / "nvidia-h100.json"
    p.write_text(json.dumps({"gpu": GPU, "results": [OK, {"id": "big", "workload": {"model": "hf:gpt2"},
                                                          "status": "oom"},
                                                     {"id": "late", "status": "skipped: time budget spent"}]}))
    with caplog.at_level("WARNING"):
        [m] = read_measurements(p)
    assert m.step_time_s == OK["median_step_time_s"]
    assert [r.getMessage() for r in caplog.records] == [
        f"{p}: 2 of its 3 workloads not measured, left out: big (oom), late (skipped: time budget spent)"]
