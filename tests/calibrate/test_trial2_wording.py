"""What calibrate and estimate say (a new user's second trial, defect 4): --reset --gpu removes one table, not the
file; memory "not measured" says which figure the runs lacked and how to record it; an empty or binary log is
refused in the run-log reader's words; runs of one workload that disagree are said in the calibration line."""

from __future__ import annotations

import json

import pytest

from gpuwise.calibrate.apply import describe
from gpuwise.calibrate.fit import FitRow, fit_gpu
from gpuwise.calibrate.store import load, save, user_calibration_path
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime.model import StepTime
from tests.calibrate.helpers import synthetic_log, write_model


def _cal(gpu: str, measured_s=(0.012,)):
    return fit_gpu(gpu, [FitRow(f"{gpu}-{i}", {"matmul/fp16": 0.01}, 0.0, m) for i, m in enumerate(measured_s)],
                   today="2026-12-07")


def test_reset_of_one_gpu_says_the_file_stays(gpuwise, config_dir):
    save({"a100-40gb-sxm4": _cal("a100-40gb-sxm4"), "rtx-4090": _cal("rtx-4090")})
    r = gpuwise("calibrate", "--reset", "--gpu", "a100-40gb-sxm4")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    path = user_calibration_path()
    assert path.is_file() and set(load()) == {"rtx-4090"}
    assert "removed the calibration of a100-40gb-sxm4 from" in text and "(kept there: rtx-4090)" in text
    r = gpuwise("calibrate", "--reset", "--gpu", "rtx-4090", "--json")
    assert not path.exists() and r.returncode == 0 and json.loads(r.stdout)["kept"] == []


def test_memory_not_measured_says_the_torch_peak_is_missing_and_how_to_record_it(gpuwise, tmp_path):
    spec = write_model(tmp_path)
    workload = {"model": spec, "batch_size": 16, "precision": "fp32", "optimizer": "adamw"}
    log = synthetic_log(tmp_path / "nvml-only.db", workload=workload, step_time_s=0.004, reserved_bytes=None)
    r = gpuwise("calibrate", log)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "no run recorded memory figures" not in text
    assert "recorded the job's process memory (NVML) but not PyTorch's peak reserved memory" in text
    assert "--torch-hook" in text
    # kept in the file: the next `gpuwise calibrate` says it too
    assert "but not PyTorch's peak reserved memory" in " ".join(gpuwise("calibrate").stdout.split())


@pytest.mark.parametrize("content", [b"", b"\x00\xffbinary\xfe"])
def test_an_empty_or_binary_log_is_refused_in_the_run_log_readers_words(gpuwise, tmp_path, content):
    log = tmp_path / "run.db"
    log.write_bytes(content)
    calibrate, report = gpuwise("calibrate", log), gpuwise("report", log)
    assert calibrate.returncode == report.returncode == 2
    assert calibrate.stderr.strip().splitlines() == report.stderr.strip().splitlines()


def test_runs_that_disagree_are_said_in_the_calibration_line():
    gpu = resolve_gpu(load_catalog(user_file=False), "rtx-4090")
    cal = _cal("rtx-4090", (0.036, 0.068))
    step = StepTime(gpu="rtx-4090", count=1, step_time_s=0.010, samples_per_s=100.0, by_class_s={"matmul": 0.010},
                    bound="compute", compute_s=0.010, device_s=0.010)
    text = describe(step, cal, "amp-fp16", gpu)
    assert "36 ms and 68 ms" in text and "1.89x apart" in text
    assert "apart" not in describe(step, _cal("rtx-4090", (0.036,)), "amp-fp16", gpu)   # one run: no disagreement
