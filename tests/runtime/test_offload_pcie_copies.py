"""The PCIe copies of an offloaded LLM step, against the arithmetic of what each framework copies (bytes a parameter
over the host link's rate). FSDP's CPUOffload keeps the sharded flat parameters in CPU RAM in their own dtype, float32
masters under AMP: each pass copies a GPU's float32 shard in before the all-gather, and each micro-batch's gradient
shard goes out to a float32 pinned buffer (every micro-batch's); no updated weights come back after the CPU step, the next forward copies
them in. DeepSpeed ZeRO-Offload casts each gradient partition to float32 on the GPU before copying it out, and copies
its updated 16-bit working partition back after the CPU step. Before, every offload was timed at 2 bytes a weight in
and 2 + 2 bytes a parameter a step: on 8 A100s FSDP's Llama-3.1-8B copies took 0.45 s instead of 0.72 s."""

from __future__ import annotations

import os

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.catalog.topology import PCIE_X16_GBS
from gpuwise.memory.llm import train_memory
from gpuwise.runtime.llm import HOST_COPY_EFF, OFFLOAD_CLASS, cpu_optimizer_s, train_step_time
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LLAMA8 = "hf:meta-llama/Llama-3.1-8B"
GPUS = 8
PASSES = 3      # forward, the checkpointed forward rerun, backward: each gathers every unit's weights


@pytest.fixture(scope="module")
def arch():
    return load_arch(LLAMA8)


@pytest.fixture(scope="module")
def a100():
    return load_catalog(user_file=False).gpu("a100-80gb-sxm4")


def _offloaded(sharding: str, offload: str, **kw) -> Workload:
    base = dict(finetune="full", seq_len=2048, batch_size=1, grad_checkpointing=True, precision="amp-bf16",
                sharding=sharding, offload=offload, num_gpus=GPUS)
    return Workload(LLAMA8, **{**base, **kw})


def _offload_part_s(arch, w: Workload, gpu) -> float:
    return train_step_time(arch, w, gpu, train_memory(arch, w, gpu)).by_class_s[OFFLOAD_CLASS]


def _pcie_s(bytes_: float, gpu) -> float:
    return bytes_ / (PCIE_X16_GBS[gpu.pcie_gen] * HOST_COPY_EFF * 1e9)


def test_fsdp_offload_copies_float32_shards_in_each_pass_and_float32_gradients_out(arch, a100):
    shard_params = arch.param_counts().total / GPUS
    copies_bytes = PASSES * 4 * shard_params + 4 * shard_params
    expected_s = cpu_optimizer_s("adamw", shard_params) + _pcie_s(copies_bytes, a100)
    assert _offload_part_s(arch, _offloaded("fsdp", "optimizer"), a100) == pytest.approx(expected_s, rel=1e-3)


def test_fsdp_offload_copies_the_float32_shards_in_and_gradients_out_for_every_micro_batch(arch, a100):
    one = _offload_part_s(arch, _offloaded("fsdp", "optimizer"), a100)
    four = _offload_part_s(arch, _offloaded("fsdp", "optimizer", grad_accum_steps=4), a100)
    shard_params = arch.param_counts().total / GPUS
    assert four - one == pytest.approx(3 * _pcie_s((PASSES * 4 + 4) * shard_params, a100), rel=1e-3)


def test_zero2_offload_copies_float32_gradients_out_and_16_bit_weights_back(arch, a100):
    shard_params = arch.param_counts().total / GPUS
    expected_s = cpu_optimizer_s("adamw", shard_params) + _pcie_s((4 + 2) * shard_params, a100)
    assert _offload_part_s(arch, _offloaded("zero2", "optimizer"), a100) == pytest.approx(expected_s, rel=1e-3)


def test_zero3_param_offload_copies_16_bit_weights_in_and_nothing_back(arch, a100):
    shard_params = arch.param_counts().total / GPUS
    expected_s = cpu_optimizer_s("adamw", shard_params) + _pcie_s((PASSES * 2 + 4) * shard_params, a100)
    assert _offload_part_s(arch, _offloaded("zero3", "params"), a100) == pytest.approx(expected_s, rel=1e-3)


def test_the_host_ram_of_fsdp_offload_is_the_float32_parameters_their_gradients_and_adam(arch, a100):
    mem = train_memory(arch, _offloaded("fsdp", "optimizer"), a100)
    assert mem.cpu_offload_bytes == pytest.approx(arch.param_counts().total * (4 + 4 + 8), rel=1e-6)
    assert mem.offloaded_weights_bytes == pytest.approx(arch.param_counts().total * 4, rel=1e-6)
