"""A calibrated LLM step (the closed form's) re-derives its bound and launch warning from its calibrated figures.

Before: the closed form's training step kept no pace and a ``compute_s`` of its kernels alone (not the sum of its
classes), so a calibration that found the user's host issue 5x faster turned a one-GPU 125M step into "bound by
communication" (its GPU time came out negative) and kept "launch-bound: ~18.9 ms of host time"; a 50 ms host term
left the launch warning where the step was host-bound. An HF generate request batch bound by its host-bound
decode turned "compute" under any calibration of its GPU, though no class of it was scaled.
"""

from __future__ import annotations

import pytest

from gpuwise.calibrate.apply import corrected_time
from gpuwise.calibrate.fit import GpuCalibration
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload
from gpuwise.workload.decoder import arch_from_config
from tests.closed_form.test_llm_time_laws import LLAMA_125M

ARCH = arch_from_config(LLAMA_125M)


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def _cal(**fields) -> GpuCalibration:
    return GpuCalibration(**{**dict(gpu="h100-sxm", class_factors={}, global_factor=1.0, host_s=0.0,
                                    memory_offset_bytes=None, runs=()), **fields})


def _step(h100, **fields):
    w = Workload("llama-125m", **{**dict(batch_size=1, seq_len=128, precision="bf16", optimizer="none"), **fields})
    return estimate_llm(w, h100, arch=ARCH).time


def _launch(step) -> list[str]:
    return [w for w in step.warnings if w.startswith("launch-bound")]


def test_a_faster_host_issue_ends_the_launch_bound_llm_step(h100):
    shipped = _step(h100)
    assert shipped.bound == "launch" and _launch(shipped)
    after = corrected_time(shipped, _cal(class_factors={"launch": 0.2}), "bf16", h100)
    assert after.host_s < after.device_s
    assert after.bound in ("compute", "memory")
    assert not _launch(after)
    assert after.step_time_s < shipped.step_time_s


def test_a_host_term_that_paces_the_llm_step_says_host_bound(h100):
    shipped = _step(h100)
    after = corrected_time(shipped, _cal(host_s=0.050), "bf16", h100)
    assert after.bound == "host"
    [host] = [w for w in after.warnings if w.startswith("host-bound")]
    assert "~50.0 ms per step" in host
    assert not _launch(after)


def test_a_slower_gpu_makes_a_launch_bound_llm_step_gpu_bound_and_says_so_with_its_figures(h100):
    shipped = _step(h100)
    after = corrected_time(shipped, _cal(class_factors={"elementwise/bf16": 6.0, "matmul/bf16": 6.0}), "bf16", h100)
    assert after.device_s > after.host_s and after.bound in ("compute", "memory") and not _launch(after)
    before = _step(h100, batch_size=8, seq_len=2048)      # GPU-bound: a slower host makes it launch-bound
    assert before.bound != "launch"
    slow_host = corrected_time(before, _cal(class_factors={"launch": 40.0}), "bf16", h100)
    assert slow_host.bound == "launch"
    [launch] = _launch(slow_host)
    assert f"{slow_host.device_s * 1e3:.1f} ms the GPU is busy" in launch


@pytest.mark.parametrize("fields", [dict(), dict(batch_size=8, seq_len=2048, optimizer="adamw", finetune="lora"),
                                    dict(batch_size=4, seq_len=1024, optimizer="adamw", num_gpus=8, sharding="zero3"),
                                    dict(mode="infer", engine="hf", max_new_tokens=64),
                                    dict(mode="infer", engine="vllm", max_new_tokens=64, num_gpus=2)])
def test_every_closed_form_step_keeps_step_time_equal_to_compute_communication_and_overhead(h100, fields):
    step = _step(h100, **fields)
    assert step.step_time_s == pytest.approx(step.compute_s + step.communication_s + step.sharding_overhead_s)
    assert sum(step.by_class_s.values()) == pytest.approx(step.compute_s)


def test_an_hf_request_batch_keeps_its_bound_under_a_calibration_that_scales_none_of_it(h100):
    shipped = _step(h100, mode="infer", engine="hf", max_new_tokens=128)
    assert shipped.bound == "launch"
    after = corrected_time(shipped, _cal(class_factors={"matmul/bf16": 1.3}), "bf16", h100)
    assert after.bound == "launch" and after.warnings == shipped.warnings
    assert after.step_time_s == pytest.approx(shipped.step_time_s)
