"""Data-parallel communication: how long the collectives take and how much of it backward hides.

Ring collectives (what NCCL uses inside one node): an all-reduce moves 2(n-1)/n of the buffer
over the slowest link, a reduce-scatter or an all-gather (n-1)/n of it. Bus bandwidth is NVLink's
per-direction rate where the GPU has it, else the PCIe generation's x16 rate, times what NCCL
reaches in practice (nccl-tests busbw: ~80% of NVLink, ~70% of PCIe; GeForce cards without P2P go
through host memory and reach less).
"""

from __future__ import annotations

from dataclasses import dataclass

# x16, one direction, GB/s.
PCIE_GBS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
NVLINK_EFF = 0.80
PCIE_EFF = 0.70
PCIE_NO_P2P_EFF = 0.50
INTER_NODE_GBS = 25.0          # 200 Gb/s InfiniBand per GPU: the assumption beyond one node
GPUS_PER_NODE = 8
LATENCY_PER_HOP_S = 8e-6
DDP_BUCKET_BYTES = 25 * 2**20  # torch DDP's default bucket_cap_mb


@dataclass(frozen=True)
class CommTime:
    total_s: float        # every collective of one step, end to end
    exposed_s: float      # the part that backward / forward does not hide
    link: str             # "nvlink", "pcie4", "pcie4-no-p2p", "inter-node"
    bus_gbs: float
    notes: tuple[str, ...] = ()


def bus_bandwidth_gbs(gpu, count: int) -> tuple[float, str]:
    """Achievable ring bus bandwidth (GB/s) between ``count`` GPUs of this kind, and the link's name."""
    if count > GPUS_PER_NODE:
        return INTER_NODE_GBS * 0.8, "inter-node"
    if gpu.nvlink_gbs:
        return gpu.nvlink_gbs / 2 * NVLINK_EFF, "nvlink"
    gen = int(gpu.pcie_gen or 4)
    per_dir = PCIE_GBS.get(gen, PCIE_GBS[4])
    # GeForce cards have peer-to-peer disabled since Ada: traffic bounces through host memory.
    if gpu.arch in ("ada", "blackwell") and "geforce" in gpu.name.lower():
        return per_dir * PCIE_NO_P2P_EFF, f"pcie{gen}-no-p2p"
    return per_dir * PCIE_EFF, f"pcie{gen}"


def ring_s(kind: str, size_bytes: float, count: int, bus_gbs: float) -> float:
    """Time of one ring collective of ``kind`` ("all_reduce", "reduce_scatter", "all_gather")."""
    if count <= 1 or size_bytes <= 0:
        return 0.0
    share = (count - 1) / count
    volume = 2 * share * size_bytes if kind == "all_reduce" else share * size_bytes
    hops = 2 * (count - 1) if kind == "all_reduce" else count - 1
    return volume / (bus_gbs * 1e9) + hops * LATENCY_PER_HOP_S


def data_parallel_comm(
    *, sharding: str, count: int, grad_bytes: float, param_bytes: float,
    forward_s: float, backward_s: float, gpu,
) -> CommTime:
    """Collectives of one optimizer step of data parallelism, and what is left exposed.

    DDP all-reduces gradient buckets while backward still runs, so only the last bucket and
    whatever exceeds backward's time is exposed. ZeRO-1/2 reduce-scatter gradients the same way,
    then all-gather the updated parameters after the optimizer (exposed). ZeRO-3/FSDP also
    all-gather parameters before each layer in forward and backward (prefetched: exposed only
    where the gathers outrun the compute).
    """
    bus_gbs, link = bus_bandwidth_gbs(gpu, count)
    notes: list[str] = []
    if count > GPUS_PER_NODE:
        notes.append(f"more than {GPUS_PER_NODE} GPUs: assumed several nodes linked at "
                     f"{INTER_NODE_GBS:.0f} GB/s per GPU (200 Gb/s InfiniBand)")
    if count <= 1:
        return CommTime(0.0, 0.0, link, bus_gbs)
    last_bucket = min(grad_bytes, DDP_BUCKET_BYTES)
    if sharding == "ddp":
        total = ring_s("all_reduce", grad_bytes, count, bus_gbs)
        exposed = ring_s("all_reduce", last_bucket, count, bus_gbs) + max(0.0, total - backward_s)
    elif sharding in ("zero1", "zero2"):
        reduce = ring_s("reduce_scatter", grad_bytes, count, bus_gbs)
        gather = ring_s("all_gather", param_bytes, count, bus_gbs)
        total = reduce + gather
        exposed = ring_s("reduce_scatter", last_bucket, count, bus_gbs) + max(0.0, reduce - backward_s) + gather
    else:  # zero3 / fsdp
        gather = ring_s("all_gather", param_bytes, count, bus_gbs)
        reduce = ring_s("reduce_scatter", grad_bytes, count, bus_gbs)
        total = 2 * gather + reduce
        exposed = (ring_s("all_gather", last_bucket, count, bus_gbs)
                   + max(0.0, gather - forward_s) + max(0.0, gather + reduce - backward_s))
    return CommTime(total, min(total, exposed), link, bus_gbs, tuple(notes))
