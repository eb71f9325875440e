"""NCCL's buffers in the closed form (LLMs): NCCL allocates them itself, outside PyTorch's caching allocator, so they
are in what nvidia-smi shows and not in ``torch.cuda.max_memory_allocated/reserved`` (memory.parallel, as the traced
path counts them). The closed form had them in the breakdown's ``other_bytes``, so a ZeRO-2 LoRA job's peak allocated
rose from 8 to 16 A100s (22.05 -> 22.09 -> 22.07 GiB at 8, 16 and 64): a ring that crosses nodes opens network
channels, more than sharding a LoRA's small optimizer state saves. The allocator's peak now falls with every GPU;
what nvidia-smi shows still steps up once where the ring leaves the node, by those channels' buffers."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import topology_for
from gpuwise.memory.llm import train_memory
from gpuwise.memory.parallel import nccl_buffer_bytes, ring_of
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

COUNTS = (2, 4, 8, 16, 32, 64)


@pytest.fixture(scope="module")
def a100():
    return resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")


def _lora(model: str, sharding: str, count: int) -> Workload:
    return Workload(model, seq_len=1024, batch_size=1, precision="amp-bf16", finetune="lora", sharding=sharding,
                    num_gpus=count)


def _memory(model: str, sharding: str, count: int, gpu):
    return train_memory(load_arch(model), _lora(model, sharding, count), gpu).memory


@pytest.mark.parametrize("sharding", ["zero1", "zero2"])
@pytest.mark.parametrize("with_gpu", [True, False])
def test_sharded_lora_peak_allocated_falls_with_every_gpu_given_or_not(llama7b_spec, a100, sharding, with_gpu):
    gpu = a100 if with_gpu else None
    peaks = [_memory(llama7b_spec, sharding, n, gpu).peak_allocated_bytes for n in COUNTS]
    assert all(later < earlier for earlier, later in zip(peaks, peaks[1:])), peaks


@pytest.mark.parametrize(("sharding", "count"), [("ddp", 8), ("zero2", 8), ("zero2", 16), ("zero3", 64)])
def test_nccl_buffers_are_in_what_nvidia_smi_shows_only(llama7b_spec, a100, sharding, count):
    memory = _memory(llama7b_spec, sharding, count, a100)
    link, multi_node = ring_of(topology_for(a100), count)
    outside_allocator = memory.total_bytes - memory.peak_reserved_bytes - memory.cuda_context_bytes
    assert outside_allocator == nccl_buffer_bytes(link, multi_node=multi_node) > 0
    parts = ("weights", "gradients", "optimizer", "activations", "workspace", "other")
    assert sum(getattr(memory, f"{p}_bytes") for p in parts) == memory.peak_allocated_bytes


def test_nvidia_smi_total_steps_up_once_where_the_ring_leaves_the_node_by_the_network_channels(llama7b_spec, a100):
    """The one rise that is physical: 16 A100s are two nodes of 8, and each rank's rings then reach a peer over the
    network as well (NCCL's network channels, their buffers allocated once at the communicator's creation); past
    that the count only shards, so the total falls again."""
    topology = topology_for(a100)
    assert topology.nodes(8) == 1 and topology.nodes(16) == 2
    total = {n: _memory(llama7b_spec, "zero2", n, a100).total_bytes for n in (8, 16, 32)}
    (inside, one_node), (across, two_nodes) = ring_of(topology, 8), ring_of(topology, 16)
    assert inside == across and not one_node and two_nodes
    network = nccl_buffer_bytes(across, multi_node=True) - nccl_buffer_bytes(inside)
    assert network > 0
    assert total[8] < total[16] < total[8] + network
    assert total[32] < total[16]
