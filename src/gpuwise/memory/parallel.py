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
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuwise.memory.model import MemoryEstimate
from gpuwise.workload import SHARDINGS
from gpuwise.workload.parallelism import DEEPSPEED_REDUCE_BUCKET_ELEMENTS, PREFETCH_DEPTH

if TYPE_CHECKING:
    from gpuwise.catalog.topology import Topology

NCCL_BYTES_PER_CHANNEL_PEER = 4 * 2**20 + 4_718_592 + 256 * 2**10   # Simple + LL128 + LL buffers
NCCL_RING_PEERS = 2
# Channels NCCL opens per link kind (NCCL_MIN/MAX_NCHANNELS unset): many on NVSwitch/NVLink, few on PCIe.
NCCL_CHANNELS = {"nvswitch": 32, "nvlink-mesh": 12, "nvlink-bridge": 4, "pcie-p2p": 4, "pcie-host": 2,
                 "network": 4}


@dataclass(frozen=True)
class ParallelMemory:
    """Bytes to add to one GPU's single-GPU peak (negative entries: what sharding removes)."""

    bucket_bytes: int           # DDP gradient buckets / DeepSpeed reduce bucket
    nccl_buffer_bytes: int      # NCCL communicator buffers
    gather_buffer_bytes: int    # ZeRO-3/FSDP: gathered units and a unit's unsharded gradients
    sharded_saving_bytes: int   # weights, gradients, optimizer state this GPU no longer holds (<= 0)
    notes: tuple[str, ...] = ()
    # the saving by category (each <= 0; they sum to sharded_saving_bytes)
    weights_saving_bytes: int = 0
    gradients_saving_bytes: int = 0
    optimizer_saving_bytes: int = 0

    @property
    def added_bytes(self) -> int:
        return self.bucket_bytes + self.nccl_buffer_bytes + self.gather_buffer_bytes + self.sharded_saving_bytes


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
    bytes_per_element: int = 2, offload_params: bool = False,
) -> ParallelMemory:
    """What ``count``-way data parallelism of ``sharding`` adds to one GPU's peak.

    ``weights_bytes``/``gradients_bytes``/``optimizer_bytes``: what one GPU holds when training alone;
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
    by_category = {
        "optimizer": -int(optimizer_bytes * keep),
        "gradients": -int(gradients_bytes * keep) if sharding in ("zero2", "zero3", "fsdp") else 0,
        "weights": -int(weights_bytes * keep) if sharding in ("zero3", "fsdp") else 0,
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


def _gathered(weights_bytes: int, gradients_bytes: int, layers: int) -> int:
    """ZeRO-3/FSDP: the unit in use and PREFETCH_DEPTH ahead, gathered, and one unit's gradients."""
    units = max(1, layers)
    return int((PREFETCH_DEPTH + 1) * weights_bytes / units + gradients_bytes / units)


def with_data_parallel(estimate: MemoryEstimate, parallel: ParallelMemory, count: int, sharding: str) -> MemoryEstimate:
    """``estimate`` (one GPU training alone) with what ``count``-way data parallelism adds and removes.

    The additions stay allocated for the whole run (buckets, NCCL buffers, gathered units), so they add
    to the peak, its reservation and what nvidia-smi shows; the sharded bytes leave the peak's breakdown.
    The peak's moment may move (a sharded optimizer step may no longer be the peak): to first order the
    peak moves by the sum, which this keeps.
    """
    if count <= 1:
        return estimate
    added = parallel.added_bytes
    note = f"{count} GPUs, {sharding}: " + "; ".join(parallel.notes) + f" ({added / 2**20:+,.0f} MiB per GPU)"
    return replace(
        estimate,
        peak_allocated_bytes=estimate.peak_allocated_bytes + added,
        peak_reserved_bytes=estimate.peak_reserved_bytes + added,
        total_bytes=estimate.total_bytes + added,
        weights_bytes=estimate.weights_bytes + parallel.weights_saving_bytes,
        gradients_bytes=estimate.gradients_bytes + parallel.gradients_saving_bytes,
        optimizer_bytes=estimate.optimizer_bytes + parallel.optimizer_saving_bytes,
        workspace_bytes=estimate.workspace_bytes + parallel.gather_buffer_bytes,
        other_bytes=estimate.other_bytes + parallel.bucket_bytes + parallel.nccl_buffer_bytes,
        notes=estimate.notes + (note,),
    )
