"""A run on a machine with GPUs of two kinds (NVML samples of an RTX 4090 and an A100) calibrates the GPU the
training ran on: the one its torch record names, else the one --gpu names; neither is one line naming the GPUs
and --gpu, never "the run names no GPU"."""

import json

import pytest

from gpuwise.calibrate import load, read_measurements, user_calibration_path
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runlog import RunLog
from tests.calibrate.helpers import GIB, GPU_NAME, synthetic_log, write_model

A100_NAME = "NVIDIA A100-SXM4-80GB"
RTX_PROCESS_BYTES = 2 * GIB       # the job's process on the RTX 4090 (GPU 0, synthetic_log's)
A100_PROCESS_BYTES = 30 * GIB     # and on the A100 (GPU 1)


def mixed_log(path, spec, *, torch_gpu_name=None, num_gpus=1):
    """synthetic_log's run on an RTX 4090, with samples of an A100 beside it where the job's processes held memory
    too; ``torch_gpu_name``: the torch record names the GPU the training process ran on."""
    workload = {"model": spec, "batch_size": 16, "precision": "fp32", "optimizer": "adamw", "num_gpus": num_gpus}
    synthetic_log(path, workload=workload, step_time_s=0.004, process_bytes=RTX_PROCESS_BYTES)
    with RunLog(path) as log:
        for i in range(5):
            log.write_gpu_samples([{"t_s": 1000.0 + i, "gpu_index": 1, "uuid": "GPU-a100", "name": A100_NAME,
                                    "utilization_pct": 60.0, "memory_used_bytes": A100_PROCESS_BYTES,
                                    "memory_total_bytes": 80 * GIB, "process_memory_bytes": A100_PROCESS_BYTES,
                                    "process_match": "pid"}])
        if torch_gpu_name is not None:
            log.log_event("torch_memory", json.dumps({"pid": 2, "devices": [
                {"device": 0, "max_allocated_bytes": GIB // 2, "max_reserved_bytes": GIB}],
                "torch_version": "2.5.1", "cuda_version": "12.4", "gpu_name": torch_gpu_name}))
    return path


@pytest.fixture
def spec(tmp_path):
    return write_model(tmp_path)


def _one_line_refusal(r):
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error:"), r.stderr
    return lines[0]


def test_the_torch_record_s_gpu_is_calibrated_with_that_gpu_s_process_memory(tmp_path, spec):
    log = mixed_log(tmp_path / "mixed.db", spec, torch_gpu_name=GPU_NAME)
    (m,) = read_measurements(log)
    assert m.gpu_name == GPU_NAME
    assert m.process_memory_bytes == RTX_PROCESS_BYTES     # not the A100's


def test_without_a_torch_record_the_refusal_names_the_gpus_and_the_flag(gpuwise, tmp_path, spec):
    log = mixed_log(tmp_path / "mixed.db", spec)
    line = _one_line_refusal(gpuwise("calibrate", log))
    cat = load_catalog(None)
    for name in ("rtx-4090", "a100-80gb-sxm4"):
        assert resolve_gpu(cat, name).id in line
    assert "--gpu" in line and GPU_NAME in line and A100_NAME in line
    assert not user_calibration_path().exists()


@pytest.mark.parametrize("gpu, name, process_bytes", [("a100-80gb-sxm4", A100_NAME, A100_PROCESS_BYTES),
                                                      ("rtx-4090", GPU_NAME, RTX_PROCESS_BYTES)])
def test_gpu_picks_the_kind_to_calibrate(gpuwise, tmp_path, spec, gpu, name, process_bytes):
    log = mixed_log(tmp_path / "mixed.db", spec)
    chosen = resolve_gpu(load_catalog(None), gpu)
    r = gpuwise("calibrate", "--gpu", gpu, log)
    assert r.returncode == 0, r.stderr
    assert set(load()) == {chosen.id}
    (m,) = read_measurements(log, load_catalog(None), chosen)
    assert (m.gpu_name, m.process_memory_bytes) == (name, process_bytes)


def test_gpu_naming_none_of_the_run_s_gpus_is_refused(gpuwise, tmp_path, spec):
    log = mixed_log(tmp_path / "mixed.db", spec)
    line = _one_line_refusal(gpuwise("calibrate", "--gpu", "h100-80gb-sxm5", log))
    assert "h100" in line and "rtx-4090" in line and "a100-80gb-sxm4" in line


def test_a_job_whose_gpus_span_the_kinds_calibrates_neither(gpuwise, tmp_path, spec):
    # DDP over the RTX 4090 and the A100: the step waits on the slower, and no one GPU's factors stand for it
    log = mixed_log(tmp_path / "ddp.db", spec, torch_gpu_name=GPU_NAME, num_gpus=2)
    line = _one_line_refusal(gpuwise("calibrate", log))
    assert "2 GPUs" in line and "kinds" in line
    assert not user_calibration_path().exists()


def test_a_torch_record_naming_a_gpu_the_catalog_lacks_says_so(gpuwise, tmp_path, spec):
    # it said the GPU "is none of them" though it may be one of the run's kinds: the catalog cannot name it
    log = mixed_log(tmp_path / "mixed.db", spec, torch_gpu_name="NVIDIA Imaginary GPU X9")
    line = _one_line_refusal(gpuwise("calibrate", log))
    assert "NVIDIA Imaginary GPU X9, is not in the catalog" in line and "none of them" not in line
