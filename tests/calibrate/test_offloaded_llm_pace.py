"""An offloaded LLM step's pace sets the GPU's busy time apart from its offload part.

Before: the closed form's training step kept a pace whose GPU busy time (``device_s``) counted the optimizer step
even under --offload, where that step is DeepSpeed's CPU-Adam and PCIe copies. A 125M step at batch 1 with
--offload optimizer issues its micro-batch's kernels in ~18.9 ms against ~6.3 ms of GPU work, but the pace set
the host's 18.9 ms against 152.6 ms "the GPU is busy" (146 ms of it the CPU's optimizer step), so the launch-bound
warning the same step carried before the pace was kept (and carries without offload) was dropped.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload
from gpuwise.workload.decoder import arch_from_config
from tests.closed_form.test_llm_time_laws import LLAMA_125M

ARCH = arch_from_config(LLAMA_125M)


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def _step(h100, **fields):
    w = Workload("llama-125m", **{**dict(batch_size=1, seq_len=128, precision="bf16", optimizer="adamw",
                                         sharding="zero2"), **fields})
    return estimate_llm(w, h100, arch=ARCH).time


def test_an_offloaded_optimizer_step_is_not_the_gpu_s_busy_time(h100):
    on_gpu, offloaded = _step(h100), _step(h100, offload="optimizer")
    # the same micro-batches on the GPU; only the optimizer step left it
    assert offloaded.device_s == pytest.approx(on_gpu.device_s - on_gpu.optimizer_s)
    assert offloaded.pace.device_s == offloaded.device_s


def test_an_offloaded_step_whose_micro_batches_wait_for_the_host_says_launch_bound(h100):
    offloaded = _step(h100, offload="optimizer")
    assert offloaded.bound == "host"                 # the CPU's optimizer step is most of it
    [launch] = [w for w in offloaded.warnings if w.startswith("launch-bound")]
    assert f"more than the {offloaded.device_s * 1e3:.1f} ms the GPU is busy" in launch
    assert offloaded.host_s > offloaded.device_s
