"""What ZeRO/FSDP remove from one GPU's traced peak: only what that peak holds, and only as much as every
moment of the step holds (the sharded peak may move); NCCL's buffers are outside PyTorch's allocator."""

from pathlib import Path

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import TracedModel
from gpuwise.workload import Workload

CONVNET = f"{Path(__file__).parents[1] / 'memory' / 'tiny_models.py'}:convnet"
PARTS = ("weights", "gradients", "optimizer", "activations", "workspace", "other")
COUNT = 8


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


@pytest.fixture(scope="module")
def estimates(h100):
    """(one GPU, eight GPUs) of a convnet whose activations dwarf its weights: its peak (early in backward)
    holds hardly any gradients, and its forward none."""
    out = {}
    for sharding in ("ddp", "zero1", "zero2", "zero3", "fsdp"):
        model = TracedModel(Workload(model=CONVNET, batch_size=64, image_size=64, optimizer="adamw",
                                     precision="amp-bf16", sharding=sharding))
        out[sharding] = (model.estimate(h100, count=1, with_time=False).memory,
                         model.estimate(h100, count=COUNT, with_time=False).memory)
    return out


def test_the_peak_of_this_model_holds_activations_and_hardly_any_gradients(estimates):
    one, _ = estimates["fsdp"]
    assert one.activations_bytes > 10 * (one.weights_bytes + one.optimizer_bytes + one.gradients_bytes)


@pytest.mark.parametrize("sharding", ["zero1", "zero2", "zero3", "fsdp"])
def test_sharding_never_shows_negative_parts_and_the_parts_sum_to_the_peak(estimates, sharding):
    _, eight = estimates[sharding]
    assert all(getattr(eight, f"{p}_bytes") >= 0 for p in PARTS)
    assert sum(getattr(eight, f"{p}_bytes") for p in PARTS) == eight.peak_allocated_bytes


@pytest.mark.parametrize("sharding", ["zero2", "zero3", "fsdp"])
def test_sharded_gradients_save_nothing_at_a_peak_that_holds_none(estimates, sharding):
    one, eight = estimates[sharding]
    most_removed = (one.weights_bytes + one.optimizer_bytes) * (1 - 1 / COUNT)
    added = (eight.workspace_bytes - one.workspace_bytes) + (eight.other_bytes - one.other_bytes)  # gathers, buckets
    assert eight.peak_allocated_bytes - added >= one.peak_allocated_bytes - most_removed


def test_nccl_buffers_count_in_what_nvidia_smi_shows_not_in_the_allocator_peak(estimates):
    one, eight = estimates["ddp"]
    buckets = eight.other_bytes - one.other_bytes          # DDP's gradient buckets: allocator memory
    assert buckets > 0
    assert eight.peak_allocated_bytes == one.peak_allocated_bytes + buckets
    assert eight.peak_reserved_bytes == one.peak_reserved_bytes + buckets
    nccl = eight.total_bytes - eight.peak_reserved_bytes - eight.cuda_context_bytes
    assert nccl > 64 * 2**20 and any(f"NCCL buffers ~{nccl / 2**20:.0f} MiB" in n for n in eight.notes)
