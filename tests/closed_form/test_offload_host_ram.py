"""Host RAM of ``--offload`` (``cpu_offload_bytes``) against what the runtimes hold on the CPU: DeepSpeed ZeRO-Offload
keeps float32 partitions (16 bytes a parameter with cpu_offload, 18 with cpu_offload_params too, once training runs),
FSDP's CPUOffload the parameters in their own dtype, their gradients and torch's optimizer states."""

from __future__ import annotations

import os

import pytest

from gpuwise.memory.llm import train_memory
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch
from gpuwise.workload.storage import frozen_bytes, optimizer_state_bytes

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LLAMA7 = "hf:meta-llama/Llama-2-7b-hf"
FLOAT32_BYTES = 4


@pytest.fixture(scope="module")
def arch():
    return load_arch(LLAMA7)


def _host_bytes(arch, **kw) -> int:
    base = dict(finetune="full", seq_len=512, batch_size=1, precision="amp-bf16", optimizer="adamw")
    return train_memory(arch, Workload(LLAMA7, **{**base, **kw})).cpu_offload_bytes


def deepspeed_cpu_bytes_per_param(cpu_offload_params: bool) -> int:
    """What DeepSpeed's CPU partitions hold once training runs: float32 master + float32 gradients + two float32
    Adam states; the 16-bit parameters with cpu_offload_params (ZeRO-3). Its estimators' 16/18 term, before the
    1.5 buffer factor; their other term, 4 x GPUs, is each rank's float32 copy while the model loads (not counted:
    the steady state is, whatever the GPU count)."""
    return 4 + 4 + 8 + (2 if cpu_offload_params else 0)


@pytest.mark.parametrize("gpus", [1, 8])
def test_zero2_offload_keeps_float32_gradient_partitions_on_the_host(arch, gpus):
    params = arch.param_counts().total
    host = _host_bytes(arch, sharding="zero2", offload="optimizer", num_gpus=gpus)
    assert host == pytest.approx(params * deepspeed_cpu_bytes_per_param(False), rel=1e-6)


@pytest.mark.parametrize("gpus", [1, 4])
@pytest.mark.parametrize("offload", ["optimizer", "params"])
def test_zero3_offload_host_ram_is_deepspeeds_estimate(arch, gpus, offload):
    params = arch.param_counts().total
    host = _host_bytes(arch, sharding="zero3", offload=offload, num_gpus=gpus)
    assert host == pytest.approx(params * deepspeed_cpu_bytes_per_param(offload == "params"), rel=1e-6)


def test_zero_offload_partitions_are_float32_in_fp32_training_too(arch):
    # stage_1_and_2 clones every partition into a float32 CPU copy whatever the model's dtype
    params = arch.param_counts().total
    host = _host_bytes(arch, sharding="zero2", offload="optimizer", precision="fp32")
    assert host == pytest.approx(params * deepspeed_cpu_bytes_per_param(False), rel=1e-6)


@pytest.mark.parametrize("offload", ["optimizer", "params"])
def test_fsdp_cpu_offload_holds_float32_parameters_gradients_and_states(arch, offload):
    # FSDP has one offload, CPUOffload(offload_params=True): under AMP the sharded float32 parameters are the masters
    params = arch.param_counts().total
    per_param = FLOAT32_BYTES * 2 + optimizer_state_bytes("adamw", FLOAT32_BYTES)
    host = _host_bytes(arch, sharding="fsdp", offload=offload, num_gpus=2)
    assert host == pytest.approx(params * per_param, rel=1e-6)


def test_fsdp_lora_offload_holds_the_frozen_weights_beside_the_adapters(arch):
    w = Workload(LLAMA7, finetune="lora", seq_len=512, batch_size=1, precision="amp-bf16", sharding="fsdp",
                 offload="params", num_gpus=2)
    mem = train_memory(arch, w)
    adapters, base = mem.split.trainable, arch.param_counts().total      # the adapters come beside the base
    per_adapter = FLOAT32_BYTES * 2 + optimizer_state_bytes("adamw", FLOAT32_BYTES)
    expected = adapters * per_adapter + base * frozen_bytes("amp-bf16")
    assert mem.cpu_offload_bytes == pytest.approx(expected, rel=1e-6)
