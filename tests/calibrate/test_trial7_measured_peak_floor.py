"""Trial 7 of the calibration: a job's calibrated memory estimate is never below what a run of that job measured.

The memory offset corrects only what the caching allocator does not hold (context, workspaces): a run whose
allocator reserved more than predicted left the calibrated estimate of that very job under its measured peak, and
a run that measured less outside the allocator than predicted (a negative offset) pushed it further under, so the
next estimate called a job that had taken 1.2 GiB a 0.4 GiB one.
"""

from __future__ import annotations

import json

from tests.calibrate.helpers import GIB, synthetic_log, write_model

JOB = {"batch_size": 16, "precision": "fp32", "optimizer": "adamw"}


def _estimate(gpuwise, model: str, batch_size: int) -> dict:
    r = gpuwise("estimate", model, "-b", batch_size, "--precision", "fp32", "--optimizer", "adamw",
                "--gpu", "rtx-4090", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_calibrated_total_of_the_measured_job_is_not_below_its_measured_process_memory(gpuwise, tmp_path):
    model = write_model(tmp_path)
    shipped = _estimate(gpuwise, model, 16)["memory"]
    process_bytes = int(1.2 * GIB)
    # the allocator held far more than predicted, and less was outside it than predicted: a negative offset
    reserved_bytes = process_bytes - shipped["cuda_context_bytes"] // 2
    log = synthetic_log(tmp_path / "run.db", workload={"model": model, **JOB}, step_time_s=0.005,
                        process_bytes=process_bytes, reserved_bytes=reserved_bytes, allocated_bytes=reserved_bytes)
    assert gpuwise("calibrate", log).returncode == 0
    stored = json.loads(gpuwise("calibrate", "--json").stdout)["calibrations"][0]
    assert stored["memory_offset_bytes"] < 0

    same_job = _estimate(gpuwise, model, 16)["memory"]
    assert same_job["total_bytes"] >= process_bytes
    assert any("the most a run of this job measured" in n for n in same_job["notes"])


def test_another_job_on_that_gpu_keeps_the_offset_alone(gpuwise, tmp_path):
    model = write_model(tmp_path)
    log = synthetic_log(tmp_path / "run.db", workload={"model": model, **JOB}, step_time_s=0.005,
                        process_bytes=int(1.2 * GIB), reserved_bytes=GIB, allocated_bytes=GIB)
    assert gpuwise("calibrate", log).returncode == 0
    offset = json.loads(gpuwise("calibrate", "--json").stdout)["calibrations"][0]["memory_offset_bytes"]

    shipped = json.loads(gpuwise("estimate", model, "-b", 64, "--precision", "fp32", "--optimizer", "adamw",
                                 "--gpu", "rtx-4090", "--json", "--no-user-calibration").stdout)["memory"]
    other_job = _estimate(gpuwise, model, 64)["memory"]
    assert other_job["total_bytes"] == max(shipped["peak_reserved_bytes"], shipped["total_bytes"] + offset)
    assert not any("the most a run of this job measured" in n for n in other_job["notes"])
