"""What a new user's trial of the run → report → calibrate loop found: --export overwrote any file (its own run log
included) and wrote rows calibrate refuses; a hand-edited calibration file with a 0, nan, inf or negative value
crashed or printed nonsense; recommend's note left the host term out; a table of no GPU was applied by name; a
directory was "no such file"; a 6 µs host term was shown as setting the pace of none of its runs."""

from __future__ import annotations

import json
import logging
import os
import tomllib

import pytest
import tomli_w

from gpuwise.calibrate.explain import describe
from gpuwise.calibrate.fit import FitRow, GpuCalibration, fit_gpu
from gpuwise.calibrate.store import FILE_NAME, to_toml
from gpuwise.runlog import is_run_log
from tests.calibrate.helpers import synthetic_log, write_model

RESNET = {"model": "torchvision:resnet18", "batch_size": 64, "precision": "amp-fp16", "optimizer": "momentum"}


def _one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


# -- defect 2: --export writes a new file, or says in one line why it cannot ------------------------------------

def test_export_never_overwrites_its_own_run_log_or_any_other_file(gpuwise, tmp_path):
    log = synthetic_log(tmp_path / "victim.db", workload=RESNET, step_time_s=0.031)
    r = gpuwise("calibrate", log, "--export", log)
    _one_line_exit_2(r, "victim.db", "one of the logs read")
    assert is_run_log(log)                                   # still the SQLite run log, not JSON rows
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    r = gpuwise("calibrate", log, "--export", notes)
    _one_line_exit_2(r, "notes.txt", "already exists")
    assert notes.read_text() == "mine\n"


def test_export_to_a_directory_or_a_missing_folder_is_one_line_not_a_traceback(gpuwise, tmp_path):
    log = synthetic_log(tmp_path / "run.db", workload=RESNET, step_time_s=0.031)
    folder = tmp_path / "out"
    folder.mkdir()
    _one_line_exit_2(gpuwise("calibrate", log, "--export", folder), "is a directory")
    assert list(folder.iterdir()) == []
    _one_line_exit_2(gpuwise("calibrate", log, "--export", tmp_path / "no" / "x.jsonl"), "no folder")
    assert not (tmp_path / "no").exists()


def test_an_exported_public_row_calibrates_as_its_log_does(gpuwise, tmp_path):
    log = synthetic_log(tmp_path / "run.db", workload=RESNET, step_time_s=0.031)
    rows = tmp_path / "rows.jsonl"
    r = gpuwise("calibrate", log, "--export", rows)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    umask = os.umask(0o022)
    os.umask(umask)
    assert rows.stat().st_mode & 0o777 == 0o666 & ~umask      # a new file's mode, not a temporary file's 0600
    r = gpuwise("calibrate", rows, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["calibration"]["gpu"] == "rtx-4090"


# -- defect 8: what --export writes, calibrate reads back, or both say why not ----------------------------------

def test_a_private_model_is_said_at_export_and_on_import_not_an_unknown_model(gpuwise, tmp_path):
    spec = write_model(tmp_path)
    log = synthetic_log(tmp_path / "mlp.db", workload={"model": spec, "batch_size": 16}, step_time_s=0.004)
    rows = tmp_path / "rows.jsonl"
    r = gpuwise("calibrate", log, "--export", rows)
    assert r.returncode == 0
    [warning] = r.stderr.strip().splitlines()
    assert "private" in warning and "cannot calibrate" in warning and "gpuwise calibrate LOG" in warning
    r = gpuwise("calibrate", rows)
    _one_line_exit_2(r, "rows.jsonl:1", '"private"', "local model file", "gpuwise calibrate LOG")
    assert "unknown model" not in r.stderr


def test_a_workload_that_does_not_read_back_is_not_exported(gpuwise, tmp_path):
    log = synthetic_log(tmp_path / "run.db", workload={**RESNET, "batch_size": "lots"}, step_time_s=0.031)
    rows = tmp_path / "rows.jsonl"
    _one_line_exit_2(gpuwise("calibrate", log, "--export", rows), "run.db", "cannot be exported", "lots")
    assert not rows.exists()


# -- defect 4: out-of-range values in a hand-edited calibration file --------------------------------------------

def _stored_doc() -> dict:
    rows = [FitRow("a1b2c3d4e5f60718", {"conv/fp16": 0.02, "norm/fp16": 0.005, "launch": 0.001}, 0.0, 0.031,
                   predicted_outside_allocator_bytes=500 * 2**20, measured_outside_allocator_bytes=600 * 2**20,
                   predicted_host_s=0.004)]
    return tomllib.loads(to_toml({"rtx-4090": fit_gpu("rtx-4090", rows, today="2026-12-06")}))


BAD_VALUES = [
    (("run", "measured_step_time_s"), 0.0),
    (("run", "measured_step_time_s"), -0.031),
    (("run", "predicted_host_s"), float("nan")),
    (("class_factors", "conv/fp16"), float("nan")),
    (("class_factors", "conv/fp16"), -5.0),
    (("class_factors", "conv/fp16"), 0.0),
    (("host_s",), float("inf")),
    (("host_s",), -0.05),
    (("global_factor",), float("inf")),
]


@pytest.mark.parametrize("where,value", BAD_VALUES, ids=lambda x: str(x))
def test_an_out_of_range_value_in_the_file_stops_every_command_with_one_line_naming_it(gpuwise, config_dir,
                                                                                      where, value):
    doc = _stored_doc()
    table = doc["gpu"]["rtx-4090"]
    if where[0] == "run":
        table["run"][0][where[1]] = value
    elif len(where) == 2:
        table[where[0]][where[1]] = value
    else:
        table[where[0]] = value
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / FILE_NAME).write_text(tomli_w.dumps(doc))
    key = where[-1]
    _one_line_exit_2(gpuwise("calibrate"), FILE_NAME, "not a gpuwise calibration file", key, "--reset")
    _one_line_exit_2(gpuwise("calibrate", "--forget", "last"), FILE_NAME, key)


def test_the_values_gpuwise_writes_read_back(gpuwise, config_dir):
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / FILE_NAME).write_text(tomli_w.dumps(_stored_doc()))
    r = gpuwise("calibrate", "--json")
    assert r.returncode == 0, r.stderr
    assert [c["gpu"] for c in json.loads(r.stdout)["calibrations"]] == ["rtx-4090"]


# -- defect 5: recommend's note names the host term as estimate and report do ----------------------------------

def test_the_summary_recommend_prints_names_the_host_term():
    row = FitRow("f1", {"matmul/fp32": 4.5e-5, "launch": 4.5e-4}, 0.0, 0.0076, predicted_host_s=5.9e-4)
    cal = GpuCalibration("a100-40gb-sxm4", {"launch": 1.02}, 1.0, host_s=0.00699, memory_offset_bytes=None,
                         runs=(row,))
    assert f"host +{cal.host_s * 1e3:.2f} ms per step beside the kernels' issue" in cal.summary
    none = GpuCalibration("a100-40gb-sxm4", {"launch": 1.02}, 1.0, host_s=0.0, memory_offset_bytes=None, runs=(row,))
    assert "host" not in none.summary


# -- defect 10: a table of no GPU, a directory, a host term that set no run's pace -------------------------------

def test_a_table_of_no_catalog_gpu_is_warned_about_and_not_applied(config_dir, caplog):
    from gpuwise.catalog import load_catalog
    from gpuwise.cli.calibrate import user_correction

    doc = _stored_doc()
    doc["gpu"]["bogus-gpu"] = doc["gpu"]["rtx-4090"]
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / FILE_NAME).write_text(tomli_w.dumps(doc))
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        _correction, calibrated = user_correction(True, load_catalog())
    assert [c.gpu for c in calibrated] == ["rtx-4090"]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "[gpu.bogus-gpu] is no GPU of the catalog" in warning and "--reset --gpu bogus-gpu" in warning


def test_reset_removes_a_table_of_no_catalog_gpu_by_its_name(gpuwise, config_dir):
    doc = _stored_doc()
    doc["gpu"]["bogus-gpu"] = doc["gpu"]["rtx-4090"]
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / FILE_NAME).write_text(tomli_w.dumps(doc))
    r = gpuwise("calibrate", "--reset", "--gpu", "bogus-gpu")
    assert r.returncode == 0, r.stderr
    assert set(tomllib.loads((config_dir / FILE_NAME).read_text())["gpu"]) == {"rtx-4090"}


def test_calibrate_a_directory_says_it_is_one(gpuwise, tmp_path):
    r = gpuwise("calibrate", tmp_path)
    _one_line_exit_2(r, str(tmp_path), "is a directory")
    assert "no such file" not in r.stderr


def test_a_host_term_that_set_the_pace_of_no_run_is_not_shown_as_host_time():
    # a GPU-bound run (50 ms of kernels, 1 ms to issue them): a 6 µs host term hides behind its kernels
    row = FitRow("f1", {"conv/fp16": 0.05, "launch": 0.0}, 0.0, 0.051, predicted_host_s=0.001)
    cal = GpuCalibration("rtx-4090", {"conv/fp16": 1.02}, 1.02, host_s=6e-6, memory_offset_bytes=None, runs=(row,))
    text = describe(cal)
    assert "host +0.01 ms" not in text and "set the pace of 0" not in text
    assert "no host time beside the kernels' issue" in text
    paced = GpuCalibration("rtx-4090", {"conv/fp16": 1.0}, 1.0, host_s=0.08, memory_offset_bytes=None, runs=(row,))
    assert "host +80.00 ms per step" in describe(paced) and "set the pace of 1 of its 1 run(s)" in describe(paced)
