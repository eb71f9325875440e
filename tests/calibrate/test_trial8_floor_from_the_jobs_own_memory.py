"""Trial 8 of the calibration: a calibrated memory estimate is floored only at memory that was the job's own.

The floor of trial 7 matched runs to an estimate by the shipped step-time prediction alone, and took the run's NVML
process memory whatever it counted: a vLLM run at --gpu-memory-utilization 0.9 (the same predicted step as at 0.5,
vLLM pre-allocating that share) raised the estimate of the 0.5 job to the 0.9 run's 21.6 GiB, and a run in a
container whose pid namespace differs from the host's (process_match 'all': every process on the GPU) made a
co-tenant's memory a hard floor, said as "the most a run of this job measured".
"""

from __future__ import annotations

import json

from gpuwise.calibrate.apply import same_job_peak_bytes
from gpuwise.calibrate.calibration import duration_text
from gpuwise.calibrate.export import export_row, parse_row
from gpuwise.calibrate.fit import fit_gpu
from gpuwise.calibrate.learn import read_measurements
from gpuwise.calibrate.step import FitRow
from gpuwise.runlog import RunLog
from gpuwise.workload import Workload
from tests.calibrate.helpers import GIB, synthetic_log, write_model

FLOOR_NOTE = "the most a run of this job measured"
SERVE = ["hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--seq-len", "512", "--max-new-tokens", "64", "-b", "8",
         "--engine", "vllm", "--gpu", "rtx-4090", "--json"]
MLP_JOB = {"batch_size": 16, "precision": "fp32", "optimizer": "adamw"}


def _estimate(gpuwise, *args) -> dict:
    r = gpuwise("estimate", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _serving(gpuwise, share: float, *more) -> dict:
    return _estimate(gpuwise, *SERVE, "--gpu-memory-utilization", share, *more)


def _co_tenant_log(path, workload: dict, process_bytes: int, reserved_bytes: int):
    """A run log whose NVML process memory counted every process on the GPU (pid namespaces differed: 'all')."""
    synthetic_log(path, workload=workload, step_time_s=0.005, process_bytes=None, reserved_bytes=reserved_bytes,
                  allocated_bytes=reserved_bytes)
    with RunLog(path) as log:
        log.write_gpu_samples([{"t_s": 1010.0 + i, "gpu_index": 0, "uuid": "GPU-x", "name": "NVIDIA GeForce RTX 4090",
                                "utilization_pct": 95.0, "memory_used_bytes": process_bytes,
                                "memory_total_bytes": 24 * GIB, "process_memory_bytes": process_bytes,
                                "process_match": "all"} for i in range(5)])
    return path


def test_a_vllm_run_at_another_memory_share_sets_no_floor_on_the_job_at_this_one(gpuwise, tmp_path):
    at_90 = _serving(gpuwise, 0.9, "--no-user-calibration")
    at_50 = _serving(gpuwise, 0.5, "--no-user-calibration")
    assert at_90["time"]["by_class_s"] == at_50["time"]["by_class_s"]     # one prediction: time cannot tell them
    process_bytes = int(0.9 * 24 * GIB)                                   # what vLLM pre-allocated at 0.9
    log = synthetic_log(tmp_path / "run.db", workload=at_90["workload"], step_time_s=at_90["time"]["step_time_s"],
                        process_bytes=process_bytes, reserved_bytes=process_bytes - GIB,
                        allocated_bytes=process_bytes - GIB)
    assert gpuwise("calibrate", log).returncode == 0, "calibrate refused the run"

    other_share = _serving(gpuwise, 0.5)["memory"]
    assert other_share["total_bytes"] < process_bytes
    assert not any(FLOOR_NOTE in n for n in other_share["notes"])
    same_job = _serving(gpuwise, 0.9)["memory"]
    assert same_job["total_bytes"] >= process_bytes
    assert any(FLOOR_NOTE in n for n in same_job["notes"])


def test_process_memory_of_every_process_on_the_gpu_sets_no_floor(gpuwise, tmp_path):
    model = write_model(tmp_path)
    all_processes_bytes = 6 * GIB                      # a co-tenant's 5 GiB and more beside the job's
    log = _co_tenant_log(tmp_path / "run.db", {"model": model, **MLP_JOB}, all_processes_bytes, GIB // 4)
    assert gpuwise("calibrate", log).returncode == 0

    memory = _estimate(gpuwise, model, "-b", 16, "--precision", "fp32", "--optimizer", "adamw", "--gpu", "rtx-4090",
                       "--json")["memory"]
    assert memory["total_bytes"] < all_processes_bytes
    assert not any(FLOOR_NOTE in n for n in memory["notes"])


def test_an_exported_row_says_how_its_process_memory_was_matched(tmp_path):
    log = _co_tenant_log(tmp_path / "run.db", {"model": "torchvision:resnet18", "batch_size": 8}, 6 * GIB, GIB)
    (m,) = read_measurements(log)
    row = export_row(m, "rtx-4090")
    assert row["process_match"] == "all"
    assert parse_row(json.loads(json.dumps(row)), "rows.jsonl:1").process_match == "all"


def test_a_stored_run_without_its_jobs_key_floors_nothing():
    job = Workload("torchvision:resnet18", batch_size=8)
    stored = FitRow(fingerprint="f", predicted_by_class_s={"conv/tf32": 0.01}, predicted_other_s=0.0,
                    measured_step_time_s=0.01, measured_peak_bytes=20 * GIB)   # stored before job_key was kept
    assert same_job_peak_bytes(job, fit_gpu("rtx-4090", [stored])) is None


def test_the_calibration_line_says_the_steps_net_change(gpuwise, tmp_path):
    model = write_model(tmp_path)
    job = [model, "-b", 16, "--precision", "fp32", "--optimizer", "adamw", "--gpu", "rtx-4090", "--json"]
    log = synthetic_log(tmp_path / "run.db", workload={"model": model, **MLP_JOB}, step_time_s=0.005)
    assert gpuwise("calibrate", log).returncode == 0

    shipped_s = _estimate(gpuwise, *job, "--no-user-calibration")["time"]["step_time_s"]
    calibrated = _estimate(gpuwise, *job)
    calibrated_s = calibrated["time"]["step_time_s"]
    said = f"this step {duration_text(shipped_s)} shipped → {duration_text(calibrated_s)} calibrated"
    assert said in calibrated["calibration"]
