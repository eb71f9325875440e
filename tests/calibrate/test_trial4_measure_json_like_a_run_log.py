"""A measure.py JSON is held to a run log's rules and refused in its own words.

Before: a measure.py row of 1 or 2 timed steps calibrated (a run log needs 3 after its warm-up); a JSON without a GPU
name or without step times was refused in a run log's words ("no GPU samples, no torch record", "the guard times each
step"); a JSON whose every workload failed said "no measured workload in it" without saying why, and the workloads
left out beside measured ones were listed whole, however many.
"""

from __future__ import annotations

import json

import pytest

from gpuwise.calibrate import CalibrateError, measure_json, read_measurements
from gpuwise.report.measured import MIN_TIMED_STEPS, WARMUP_STEPS, median_step_time_s

from tests.calibrate.helpers import MEASURED_GPU as GPU, MEASURED_ROW as OK


def measure_file(tmp_path, results, gpu=GPU):
    """A measure.py JSON of ``results`` on ``gpu`` in ``tmp_path``."""
    p = tmp_path / "nvidia-h100.json"
    p.write_text(json.dumps({"gpu": gpu, "results": results}))
    return p


def _refusal(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpuwise: error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("timed", range(MIN_TIMED_STEPS + 2))
def test_a_measure_row_needs_as_many_timed_steps_as_a_run_log_after_its_warm_up(tmp_path, timed):
    # measure.py leaves its warm-up out of step_times_s; a run log's first WARMUP_STEPS are its warm-up
    run_log_measures = median_step_time_s([0.05] * (WARMUP_STEPS + timed))[0] is not None
    p = measure_file(tmp_path, [{**OK, "step_times_s": [0.05] * timed}])
    if run_log_measures:
        [m] = read_measurements(p)
        assert m.timed_steps == timed and m.step_time_s == OK["median_step_time_s"]
    else:
        with pytest.raises(CalibrateError, match=rf"\[r18\]: step_times_s holds {timed} timed steps?, fewer than the "
                                                 rf"{MIN_TIMED_STEPS} a step time needs: rerun measure.py with "
                                                 rf"--steps {MIN_TIMED_STEPS} or more"):
            read_measurements(p)


def test_a_measure_row_without_step_times_is_refused_in_the_json_s_terms(gpuwise, config_dir, tmp_path):
    row = {**OK, "step_times_s": [], "median_step_time_s": None}
    line = _refusal(gpuwise("calibrate", measure_file(tmp_path, [row])))
    assert "[r18]: step_times_s holds 0 timed steps" in line and "measure.py" in line
    assert "guard" not in line and "warm-up" not in line
    assert not (config_dir / "calibration.toml").exists()


def test_a_measure_row_with_step_times_but_no_median_says_which_key_it_lacks(tmp_path):
    with pytest.raises(CalibrateError, match=r"\[r18\]: no median_step_time_s beside its 10 step_times_s"):
        read_measurements(measure_file(tmp_path, [{**OK, "median_step_time_s": None}]))


@pytest.mark.parametrize("gpu", [{**GPU, "name": None, "nvml_name": None}, {"driver": "550.54.15", "dry_run": False},
                                 {**GPU, "name": " ", "nvml_name": ""}])
def test_a_measure_json_naming_no_gpu_is_refused_in_its_own_terms(gpuwise, config_dir, tmp_path, gpu):
    p = measure_file(tmp_path, [OK], gpu=gpu)
    line = _refusal(gpuwise("calibrate", p))
    assert line == (f"gpuwise: error: {p}: its \"gpu\" names no GPU (no nvml_name nor name, which measure.py "
                    "writes): nothing to calibrate")
    assert not (config_dir / "calibration.toml").exists()


def test_a_measure_json_of_only_failed_workloads_names_each_status(gpuwise, config_dir, tmp_path):
    p = measure_file(tmp_path, [{"id": "big", "status": "oom"}, {"id": "crash", "status": "error"},
                                 {"id": "late", "status": "skipped: time budget spent"}, {**OK, "dry_run": True}])
    line = _refusal(gpuwise("calibrate", p))
    assert line == (f"gpuwise: error: {p}: measure.py measured no workload: big (oom), crash (error), late (skipped: "
                    "time budget spent), r18 (a dry run)")


def test_a_measure_json_of_no_workload_at_all_says_so(tmp_path):
    with pytest.raises(CalibrateError, match=r"nvidia-h100\.json: measure\.py measured no workload: its results list "
                                             r"none$"):
        read_measurements(measure_file(tmp_path, []))


def test_the_failed_workloads_of_a_long_file_are_clipped_to_one_short_line(gpuwise, config_dir, tmp_path):
    failed = [{"id": f"workload-{i:03d}-" + "x" * 30, "status": "oom"} for i in range(100)]
    p = measure_file(tmp_path, failed)
    line = _refusal(gpuwise("calibrate", p))
    listed = line.split("measured no workload: ", 1)[1]
    assert listed.startswith("workload-000-") and listed.endswith("…") and len(listed) <= measure_json.LISTED_CHARS
    assert "workload-099-" not in line


def test_the_workloads_left_out_beside_measured_ones_are_clipped_too(tmp_path, caplog):
    failed = [{"id": f"workload-{i:03d}-" + "x" * 30, "status": "oom"} for i in range(100)]
    with caplog.at_level("WARNING"):
        [m] = read_measurements(measure_file(tmp_path, [OK, *failed]))
    [warning] = [r.getMessage() for r in caplog.records]
    assert m.step_time_s == OK["median_step_time_s"]
    assert "100 of its 101 workloads not measured" in warning and warning.endswith("…")
    assert len(warning.split("left out: ", 1)[1]) <= measure_json.LISTED_CHARS
