"""Bad or partial logs are refused with one line and exit 2, and never change the calibration file."""

import json

import pytest

from gpuwise.calibrate import user_calibration_path
from gpuwise.runlog import RunLog
from tests.calibrate.helpers import synthetic_log, write_model

WORKLOAD = {"batch_size": 16, "precision": "fp32", "optimizer": "adamw"}


@pytest.fixture
def spec(tmp_path):
    return write_model(tmp_path)


@pytest.fixture
def calibrated(gpuwise, tmp_path, spec):
    """A calibration file already there (one good run on rtx-4090): its bytes must survive every refusal."""
    good = synthetic_log(tmp_path / "good.db", workload={"model": spec, **WORKLOAD}, step_time_s=0.004)
    r = gpuwise("calibrate", good)
    assert r.returncode == 0, r.stderr
    return user_calibration_path().read_bytes(), good


def _refused(r, calibrated_bytes, *words):
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error:"), r.stderr
    for w in words:
        assert w in lines[0]
    assert user_calibration_path().read_bytes() == calibrated_bytes


def test_a_log_without_workload_is_refused_and_the_file_is_unchanged(gpuwise, tmp_path, calibrated):
    before, good = calibrated
    bad = synthetic_log(tmp_path / "no-workload.db", workload=None, step_time_s=0.004)
    _refused(gpuwise("calibrate", good, bad), before, "no-workload.db", "no workload")


def test_a_log_without_step_times_is_refused_and_the_file_is_unchanged(gpuwise, tmp_path, spec, calibrated):
    before, _ = calibrated
    bad = synthetic_log(tmp_path / "no-steps.db", workload={"model": spec, **WORKLOAD}, step_time_s=None)
    _refused(gpuwise("calibrate", bad), before, "no step times")


def test_a_log_with_only_warmup_steps_is_refused(gpuwise, tmp_path, spec, calibrated):
    before, _ = calibrated
    bad = synthetic_log(tmp_path / "short.db", workload={"model": spec, **WORKLOAD}, step_time_s=0.004, steps=6)
    _refused(gpuwise("calibrate", bad), before, "no step times")


def test_a_log_from_another_gpu_than_the_calibrations_is_refused(gpuwise, tmp_path, spec, calibrated):
    before, good = calibrated
    other = synthetic_log(tmp_path / "a100.db", workload={"model": spec, **WORKLOAD}, step_time_s=0.004,
                          gpu_name="NVIDIA A100-SXM4-40GB")
    _refused(gpuwise("calibrate", "--gpu", "rtx-4090", other), before, "a100", "rtx-4090")
    _refused(gpuwise("calibrate", good, other), before, "a100", "rtx-4090")


def test_a_log_naming_no_gpu_or_an_unknown_one_is_refused(gpuwise, tmp_path, spec, calibrated):
    before, _ = calibrated
    unknown = synthetic_log(tmp_path / "unknown.db", workload={"model": spec, **WORKLOAD}, step_time_s=0.004,
                            gpu_name="Imaginary GPU 9000")
    _refused(gpuwise("calibrate", unknown), before, "unknown.db")


def test_files_that_are_not_measurements_are_refused(gpuwise, tmp_path, calibrated):
    before, _ = calibrated
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    _refused(gpuwise("calibrate", text), before, "notes.txt")
    _refused(gpuwise("calibrate", tmp_path / "missing.db"), before, "missing.db")
    row = tmp_path / "rows.jsonl"
    row.write_text(json.dumps({"format": "gpuwise-measurement/1", "gpu": "rtx-4090", "workload": {},
                               "figures": {"step_time_s": -1}}) + "\n")
    _refused(gpuwise("calibrate", row), before, "step_time_s")


def test_a_damaged_calibration_file_is_one_line_naming_the_reset(gpuwise, spec, calibrated):
    user_calibration_path().write_text("format_version = 1\n[gpu.rtx-4090]\nhost_s = 'x'\n")
    r = gpuwise("estimate", spec, "--batch-size", "16", "--gpu", "rtx-4090")
    assert r.returncode == 2 and "--reset" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert gpuwise("estimate", spec, "--batch-size", "16", "--gpu", "rtx-4090", "--no-user-calibration").returncode == 0


@pytest.mark.parametrize("workload", [
    [1, 2], "a string", {"model": 5}, {"model": "torchvision:resnet18", "batch_size": "x"},
    {"model": "torchvision:resnet18", "batch_size": True}, {"model": "torchvision:nosuch"},
    {"model": "torchvision:resnet18", "precision": "weird"}, {"model": "torchvision:resnet18", "lora_targets": 5},
])
def test_a_hostile_workload_record_is_a_note_in_report_and_one_line_in_calibrate(gpuwise, tmp_path, calibrated, workload):
    before, _ = calibrated
    log = synthetic_log(tmp_path / "hostile.db", workload=None, step_time_s=0.004)
    with RunLog(log) as run_log:
        run_log.set_meta("workload", workload)
    r = gpuwise("report", log, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["predicted_vs_measured"] is None
    _refused(gpuwise("calibrate", log), before, "hostile.db")
