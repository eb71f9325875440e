"""What a GPU holds under FSDP's CPU offload. FSDP has one offload mode, CPUOffload(offload_params=True), which the
launch runs for ``--offload optimizer`` and ``--offload params`` alike: the sharded flat parameters are pinned in CPU
RAM, a shard is copied to the GPU only to be all-gathered, and each reduce-scattered gradient shard is copied to a
pinned CPU buffer (torch/distributed/fsdp/_flat_param.py, _runtime_utils.py ``_offload_grad``). So the GPU holds the
gathered units and a unit's gradients, never a weight shard of its own, whichever ``--offload`` said."""

from __future__ import annotations

import os

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.launch.sharding import ShardingSetup
from gpuwise.memory.llm import cublas_workspace_bytes, train_memory
from gpuwise.runtime.llm import train_step_time
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LLAMA8 = "hf:meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def arch():
    return load_arch(LLAMA8)


@pytest.fixture(scope="module")
def a100():
    return load_catalog(user_file=False).gpu("a100-80gb-sxm4")


def _fsdp(**kw) -> Workload:
    base = dict(finetune="full", seq_len=2048, batch_size=1, grad_checkpointing=True, precision="amp-bf16",
                sharding="fsdp")
    return Workload(LLAMA8, **{**base, **kw})


def test_the_launch_offloads_the_parameters_for_an_fsdp_optimizer_offload():
    # the premise of the memory rule: what gpuwise emits for --offload optimizer under FSDP
    note = ShardingSetup.of(_fsdp(offload="optimizer", num_gpus=4), 4).note()
    assert "CPUOffload(offload_params=True)" in note


@pytest.mark.parametrize("gpus", [1, 4])
def test_fsdp_optimizer_offload_keeps_no_weight_shard_on_the_gpu(arch, a100, gpus):
    mem = train_memory(arch, _fsdp(offload="optimizer", num_gpus=gpus), a100).memory
    assert (mem.weights_bytes, mem.gradients_bytes, mem.optimizer_bytes) == (0, 0, 0)
    # the gathered units (and a unit's gradients) are all of the model state the GPU holds
    assert mem.workspace_bytes > cublas_workspace_bytes(a100, 2)


@pytest.mark.parametrize("gpus", [1, 4])
@pytest.mark.parametrize("precision", ["amp-bf16", "bf16"])
def test_fsdp_optimizer_and_params_offload_are_the_same_gpu_estimate(arch, a100, gpus, precision):
    optimizer = train_memory(arch, _fsdp(offload="optimizer", num_gpus=gpus, precision=precision), a100)
    params = train_memory(arch, _fsdp(offload="params", num_gpus=gpus, precision=precision), a100)
    assert optimizer.memory == params.memory
    assert optimizer.cpu_offload_bytes == params.cpu_offload_bytes


def test_fsdp_offload_removes_exactly_the_model_state_shard_from_the_peak(arch, a100):
    none = train_memory(arch, _fsdp(num_gpus=4), a100).memory
    offloaded = train_memory(arch, _fsdp(offload="optimizer", num_gpus=4), a100).memory
    left = none.peak_allocated_bytes - none.optimizer_bytes - none.gradients_bytes - none.weights_bytes
    assert offloaded.peak_allocated_bytes == left


def test_a_bf16_fsdp_offload_note_does_not_claim_float32_partitions(arch):
    mem = train_memory(arch, _fsdp(offload="optimizer", num_gpus=4, precision="bf16"))
    note = next(n for n in mem.notes if n.startswith("offload:"))
    assert "float32" not in note and "weights" in note


@pytest.mark.parametrize("gpus", [1, 4])
def test_fsdp_optimizer_offload_is_timed_with_the_weight_copies_it_makes(arch, a100, gpus):
    """The time follows the same rule as the memory (``workload.parallelism.params_offloaded``): FSDP's offload
    copies every unit's weights in from the host in each pass whatever --offload said, so --offload optimizer is
    the same step as --offload params (it was timed without the copies: 10.16 s against 10.71 s on 4 A100s)."""
    steps = {}
    for offload in ("optimizer", "params"):
        w = _fsdp(offload=offload, num_gpus=gpus)
        steps[offload] = train_step_time(arch, w, a100, train_memory(arch, w, a100))
    assert steps["optimizer"].step_time_s == pytest.approx(steps["params"].step_time_s, rel=1e-9)
    assert steps["optimizer"].by_class_s["offload"] == pytest.approx(steps["params"].by_class_s["offload"], rel=1e-9)
