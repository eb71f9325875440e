"""Under gradient accumulation an offloaded step copies every micro-batch's gradients to the host, not one
optimizer step's: DeepSpeed ZeRO-Offload (``stage_1_and_2`` with ``cpu_offload``) copies the reduced gradient
partition out in every backward (``async_accumulate_grad_in_cpu_via_gpu``, then float32 at the boundary), and
FSDP's CPUOffload moves the sharded gradients to the CPU after each backward outside ``no_sync``. The updated
16-bit weights DeepSpeed copies back after the CPU step still cross once a step.

Before: the gradients' PCIe copy was part of the optimizer step, once a step, so ``--grad-accum 4`` priced the
same gradient traffic as ``--grad-accum 1`` (Llama-3.1-8B under ZeRO-2 offload on 8 A100s: 0.18 s of copies a
step instead of 0.73 s)."""

from __future__ import annotations

import os

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.memory.llm import train_memory
from gpuwise.runtime.llm import OFFLOAD_CLASS, _pcie_bytes_per_s, cpu_optimizer_s, train_step_time
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LLAMA8 = "hf:meta-llama/Llama-3.1-8B"
GPUS = 8
PASSES = 3      # forward, the checkpointed forward rerun, backward: FSDP's float32 shards come in for each
FLOAT32_BYTES = 4
BF16_BYTES = 2


@pytest.fixture(scope="module")
def arch():
    return load_arch(LLAMA8)


@pytest.fixture(scope="module")
def a100():
    return load_catalog(user_file=False).gpu("a100-80gb-sxm4")


def _step(arch, gpu, sharding: str, grad_accum_steps: int):
    w = Workload(LLAMA8, finetune="full", seq_len=2048, batch_size=1, grad_checkpointing=True,
                 precision="amp-bf16", sharding=sharding, offload="optimizer", num_gpus=GPUS,
                 grad_accum_steps=grad_accum_steps)
    return train_step_time(arch, w, gpu, train_memory(arch, w, gpu))


@pytest.mark.parametrize("grad_accum_steps", [1, 4])
def test_zero2_offload_copies_float32_gradients_out_every_micro_batch_and_weights_back_once(arch, a100,
                                                                                            grad_accum_steps):
    shard_params = arch.param_counts().total / GPUS
    gradients_out_s = shard_params * FLOAT32_BYTES / _pcie_bytes_per_s(a100)
    once_a_step_s = cpu_optimizer_s("adamw", shard_params) + shard_params * BF16_BYTES / _pcie_bytes_per_s(a100)
    step = _step(arch, a100, "zero2", grad_accum_steps)
    assert step.optimizer_s == pytest.approx(once_a_step_s, rel=1e-6)
    assert step.by_class_s[OFFLOAD_CLASS] == pytest.approx(grad_accum_steps * gradients_out_s + once_a_step_s,
                                                           rel=1e-6)


def test_four_micro_batches_copy_four_times_the_gradients_of_one(arch, a100):
    shard_params = arch.param_counts().total / GPUS
    once_a_step_s = cpu_optimizer_s("adamw", shard_params) + shard_params * BF16_BYTES / _pcie_bytes_per_s(a100)
    one = _step(arch, a100, "zero2", 1).by_class_s[OFFLOAD_CLASS] - once_a_step_s
    four = _step(arch, a100, "zero2", 4).by_class_s[OFFLOAD_CLASS] - once_a_step_s
    assert one == pytest.approx(shard_params * FLOAT32_BYTES / _pcie_bytes_per_s(a100), rel=1e-6)
    assert four == pytest.approx(4 * one, rel=1e-6)


def test_fsdp_offload_copies_each_micro_batch_s_float32_gradient_shard_out(arch, a100):
    shard_params = arch.param_counts().total / GPUS
    micro_copies_s = (PASSES + 1) * FLOAT32_BYTES * shard_params / _pcie_bytes_per_s(a100)   # shards in, grads out
    step = _step(arch, a100, "fsdp", 4)
    assert step.optimizer_s == pytest.approx(cpu_optimizer_s("adamw", shard_params), rel=1e-6)
    assert step.by_class_s[OFFLOAD_CLASS] == pytest.approx(4 * micro_copies_s + step.optimizer_s, rel=1e-6)
