"""GPU memory that data parallelism adds to (or removes from) one GPU's single-GPU peak.

One pure function, :func:`data_parallel_memory`, for the traced and the closed-form memory paths:

* DDP keeps its gradient buckets for the whole run: flat tensors as large as all gradients (a second
  copy of them, unless ``gradient_as_bucket_view=True``), so the peak grows by the gradient bytes
  (torch.nn.parallel.DistributedDataParallel, ``Reducer`` bucket allocation).
* NCCL allocates communication buffers per channel and ring peer when the communicator is created:
  ``NCCL_BUFFSIZE`` (4 MiB) for the Simple protocol plus the LL128 (~4.6 MiB) and LL (256 KiB)
  buffers, for the previous and next rank of each ring, on as many channels as the link carries
  (NCCL environment-variable docs; channel counts NCCL picks on these links, approximate).
* ZeRO/FSDP shard what they shard: ZeRO-1 the optimizer state, ZeRO-2 also the gradients, ZeRO-3 and
  FSDP also the parameters (each GPU keeps 1/count). DeepSpeed's ZeRO-1/2 reduce gradients through a
  bucket of ``reduce_bucket_size`` elements; ZeRO-3/FSDP hold the gathered parameters of the unit
  being computed and of ``PREFETCH_DEPTH`` units ahead, plus one unit's unsharded gradients before
  their reduce-scatter.
* What sharding removes is what the peak held of each sharded part, and only as much as every moment of
  the step holds (``held``): the sharded peak may move to another moment (a peak in the forward pass holds
  no gradients, so sharding them saves nothing there), and an estimate that is low is an OOM. DeepSpeed
  ZeRO-2/3 keep their gradient partitions (1/count of all gradients) for the step, so at a peak that
  held fewer gradients than a partition they add memory; FSDP frees its sharded gradients at
  ``zero_grad(set_to_none=True)`` like a single GPU.
* NCCL's buffers are allocated by NCCL, outside PyTorch's caching allocator: they are in what nvidia-smi
  shows, not in ``torch.cuda.max_memory_allocated/reserved``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable

from gpuwise.memory.model import MemoryEstimate
from gpuwise.workload import SHARDINGS
from gpuwise.workload.parallelism import DEEPSPEED_REDUCE_BUCKET_ELEMENTS, PREFETCH_DEPTH

if TYPE_CHECKING:
    from gpuwise.catalog.topology import Topology
    from gpuwise.trace.records import MemoryEvent

NCCL_BYTES_PER_CHANNEL_PEER = 4 * 2**20 + 4_718_592 + 256 * 2**10   # Simple + LL128 + LL buffers
NCCL_RING_PEERS = 2
# Channels NCCL opens per link kind (NCCL_MIN/MAX_NCHANNELS unset): many on NVSwitch/NVLink, few on PCIe.
NCCL_CHANNELS = {"nvswitch": 32, "nvlink-mesh": 12, "nvlink-bridge": 4, "pcie-p2p": 4, "pcie-host": 2,
                 "network": 4}


@dataclass(frozen=True)
class ModelState:
    """Bytes of the parts ZeRO/FSDP shard, as one GPU training alone holds them."""

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int


@dataclass(frozen=True)
class ParallelMemory:
    """Bytes to add to one GPU's single-GPU peak (negative entries: what sharding removes)."""

    bucket_bytes: int           # DDP gradient buckets / DeepSpeed reduce bucket
    nccl_buffer_bytes: int      # NCCL communicator buffers (outside PyTorch's caching allocator)
    gather_buffer_bytes: int    # ZeRO-3/FSDP: gathered units and a unit's unsharded gradients
    sharded_saving_bytes: int   # change of weights, gradients, optimizer state at the peak (the sum below)
    notes: tuple[str, ...] = ()
    # the change by category; <= 0, except ZeRO-2/3 gradients where the peak held fewer gradients than
    # the partitions DeepSpeed keeps (never more than a partition)
    weights_saving_bytes: int = 0
    gradients_saving_bytes: int = 0
    optimizer_saving_bytes: int = 0

    @property
    def added_bytes(self) -> int:
        """What the GPU's process holds in addition (what nvidia-smi shows), NCCL included."""
        return self.allocator_added_bytes + self.nccl_buffer_bytes

    @property
    def allocator_added_bytes(self) -> int:
        """What PyTorch's caching allocator holds in addition (the peak allocated/reserved): NCCL excluded."""
        return self.bucket_bytes + self.gather_buffer_bytes + self.sharded_saving_bytes


def ring_of(topology: "Topology | None", count: int) -> tuple[str, bool]:
    """(intra-node link kind, spans several nodes) of a ring of ``count`` GPUs linked as ``topology``
    says (``gpuwise.catalog.topology.topology_for(gpu, provider)``): what sets NCCL's channels. No
    topology (memory without a GPU) or one GPU: a PCIe box."""
    if topology is None or count <= 1:
        return "pcie-p2p", False
    return topology.ring_link(count).kind, topology.nodes(count) > 1


def nccl_buffer_bytes(link_kind: str, *, multi_node: bool = False) -> int:
    channels = NCCL_CHANNELS.get(link_kind, NCCL_CHANNELS["pcie-p2p"])
    if multi_node:
        channels += NCCL_CHANNELS["network"]
    return channels * NCCL_RING_PEERS * NCCL_BYTES_PER_CHANNEL_PEER


def data_parallel_memory(
    *, sharding: str, count: int, weights_bytes: int, gradients_bytes: int, optimizer_bytes: int,
    layers: int, link_kind: str = "pcie-p2p", multi_node: bool = False, gradient_as_bucket_view: bool = False,
    bytes_per_element: int = 2, offload_params: bool = False, held: ModelState | None = None,
) -> ParallelMemory:
    """What ``count``-way data parallelism of ``sharding`` adds to one GPU's peak.

    ``weights_bytes``/``gradients_bytes``/``optimizer_bytes``: what one GPU holds when training alone
    (all of the gradients); ``held``: of each, what the single-GPU peak holds and every moment of the
    step holds too, the most sharding can remove from that peak (None: all of it, for a caller that places
    the parts at the peak itself, as the closed form does);
    ``layers``: the units ZeRO-3/FSDP gather one at a time; ``link_kind``: the intra-node link
    (``gpuwise.catalog.topology``), which sets NCCL's channel count; ``bytes_per_element``: of the
    gradients DeepSpeed reduces (2 for fp16/bf16 training); ``offload_params``: ZeRO-3 keeps the
    parameters in CPU memory and gathers each unit onto the GPU, even on one GPU.
    """
    if sharding not in SHARDINGS:
        raise ValueError(f"unknown sharding {sharding!r} (known: {', '.join(SHARDINGS)})")
    if count <= 1:
        if offload_params and sharding in ("zero3", "fsdp"):
            return ParallelMemory(0, 0, _gathered(weights_bytes, gradients_bytes, layers), 0,
                                  ("parameters offloaded: the units in use are gathered onto the GPU",))
        return ParallelMemory(0, 0, 0, 0)
    nccl = nccl_buffer_bytes(link_kind, multi_node=multi_node)
    notes = [f"NCCL buffers ~{nccl / 2**20:.0f} MiB ({link_kind})"]
    keep = 1.0 - 1.0 / count
    if sharding == "ddp":
        buckets = 0 if gradient_as_bucket_view else gradients_bytes
        if buckets:
            notes.append(f"DDP gradient buckets {buckets / 2**20:.0f} MiB (a copy of the gradients)")
        return ParallelMemory(buckets, nccl, 0, 0, tuple(notes))
    held = held or ModelState(weights_bytes, gradients_bytes, optimizer_bytes)
    by_category = {
        "optimizer": -int(held.optimizer_bytes * keep),
        "gradients": _gradients_change(sharding, count, gradients_bytes, held.gradients_bytes),
        "weights": -int(held.weights_bytes * keep) if sharding in ("zero3", "fsdp") else 0,
    }
    saving = sum(by_category.values())
    savings = dict(weights_saving_bytes=by_category["weights"], gradients_saving_bytes=by_category["gradients"],
                   optimizer_saving_bytes=by_category["optimizer"])
    if sharding in ("zero1", "zero2"):
        bucket = min(gradients_bytes, DEEPSPEED_REDUCE_BUCKET_ELEMENTS * bytes_per_element)
        notes.append(f"ZeRO reduce bucket {bucket / 2**20:.0f} MiB")
        return ParallelMemory(int(bucket), nccl, 0, saving, tuple(notes), **savings)
    gather = _gathered(weights_bytes, gradients_bytes, layers)
    notes.append(f"{PREFETCH_DEPTH + 1} gathered units of {max(1, layers)} and one unit's gradients: "
                 f"{gather / 2**20:.0f} MiB")
    return ParallelMemory(0, nccl, gather, saving, tuple(notes), **savings)


def _gradients_change(sharding: str, count: int, gradients_bytes: int, held_bytes: int) -> int:
    """How the gradients at the peak change: DeepSpeed ZeRO-2/3 hold the partition of all gradients
    instead of what the peak held; FSDP a shard of what the peak held; DDP and ZeRO-1 all of them."""
    if sharding in ("zero2", "zero3"):
        # the partition (gradients / count) in place of what was held, written so that holding them all is
        # exactly the 1/count saving
        return -int(gradients_bytes * (1.0 - 1.0 / count)) + (gradients_bytes - held_bytes)
    if sharding == "fsdp":
        return -int(held_bytes * (1.0 - 1.0 / count))
    return 0


def held_throughout(events: "Iterable[MemoryEvent]", at_peak: ModelState) -> ModelState:
    """Of the sharded parts live at a traced peak (``at_peak``), what every moment of the measured step
    (the events with an op index) holds too: sharding removes that much from the peak at most, wherever
    the sharded peak lands."""
    live = {"weights": 0, "gradients": 0, "optimizer": 0}
    least: dict[str, int] | None = None
    sizes: dict[int, tuple[str, int]] = {}
    for ev in events:
        if least is None and ev.op_index >= 0:
            least = dict(live)
        if ev.kind == "alloc":
            sizes[ev.block_id] = (ev.category, ev.size_bytes)
            if ev.category in live:
                live[ev.category] += ev.size_bytes
        else:
            category, size = sizes.pop(ev.block_id, ("", 0))
            if category in live:
                live[category] -= size
        if least is not None:
            for c, b in live.items():
                least[c] = min(least[c], b)
    least = least if least is not None else live
    return ModelState(weights_bytes=min(at_peak.weights_bytes, least["weights"]),
                      gradients_bytes=min(at_peak.gradients_bytes, least["gradients"]),
                      optimizer_bytes=min(at_peak.optimizer_bytes, least["optimizer"]))


def _gathered(weights_bytes: int, gradients_bytes: int, layers: int) -> int:
    """ZeRO-3/FSDP: the unit in use and PREFETCH_DEPTH ahead, gathered, and one unit's gradients."""
    units = max(1, layers)
    return int((PREFETCH_DEPTH + 1) * weights_bytes / units + gradients_bytes / units)


def with_data_parallel(estimate: MemoryEstimate, parallel: ParallelMemory, count: int, sharding: str) -> MemoryEstimate:
    """``estimate`` (one GPU training alone) with what ``count``-way data parallelism adds and removes.

    The additions stay allocated for the whole run (buckets, NCCL buffers, gathered units), so they add
    to what nvidia-smi shows; all but NCCL's buffers, which NCCL allocates outside PyTorch's caching
    allocator, add to the peak allocated and reserved too. The sharded bytes leave the peak's breakdown:
    only what the peak and every other moment of the step held (``held_throughout``), so the sharded
    peak, wherever it lands, is not above this.
    """
    if count <= 1:
        return estimate
    added = parallel.added_bytes
    in_allocator = parallel.allocator_added_bytes
    note = f"{count} GPUs, {sharding}: " + "; ".join(parallel.notes) + f" ({added / 2**20:+,.0f} MiB per GPU)"
    return replace(
        estimate,
        peak_allocated_bytes=estimate.peak_allocated_bytes + in_allocator,
        peak_reserved_bytes=estimate.peak_reserved_bytes + in_allocator,
        total_bytes=estimate.total_bytes + added,
        weights_bytes=estimate.weights_bytes + parallel.weights_saving_bytes,
        gradients_bytes=estimate.gradients_bytes + parallel.gradients_saving_bytes,
        optimizer_bytes=estimate.optimizer_bytes + parallel.optimizer_saving_bytes,
        workspace_bytes=estimate.workspace_bytes + parallel.gather_buffer_bytes,
        other_bytes=estimate.other_bytes + parallel.bucket_bytes,
        notes=estimate.notes + (note,),
    )
