"""Data-parallel communication: a timeline of the collectives of one optimizer step, over the links the
GPUs really have, and how much of it backward (and forward) hides.

* Collectives are NCCL rings. Inside a node a ring all-reduce moves 2(n-1)/n of the buffer over its
  slowest hop, a reduce-scatter or all-gather (n-1)/n, at the link's bus bandwidth (nccl-tests
  busbw, from ``gpuwise.catalog.topology``). Beyond one node the collective is hierarchical:
  inside each node as above, and between nodes each GPU carries 1/g of the buffer over its share of
  the node's network, so the inter-node part costs 2(m-1)/m × bytes / network bandwidth per node.
* DDP: gradients go into buckets in the order backward produces them (what DDP's bucket rebuild does
  after the first step): the first bucket closes at 1 MiB, the others at 25 MiB; a bucket closes as
  soon as it reaches its cap, so a tensor larger than the cap closes the bucket it lands in. Each
  bucket's all-reduce is queued on the one communication stream when its last gradient is ready.
  DDP also copies every gradient into its bucket, divides it by the world size, and copies it back
  (memory-bound, on the compute stream, not hidden).
* ZeRO-1/2 (DeepSpeed): gradients are reduce-scattered in buckets of DeepSpeed's default
  ``reduce_bucket_size`` (5e8 elements); ZeRO-2 does so on every micro-step (its gradients are
  sharded), ZeRO-1 once per step. The updated parameters are all-gathered after the optimizer step,
  exposed.
* ZeRO-3/FSDP: each unit (a layer) is all-gathered before its forward and again before its backward,
  ``PREFETCH_DEPTH`` units ahead; its gradients are reduce-scattered after its backward.
* Overlap is limited by contention: while a collective runs, NCCL's kernels take SMs and memory
  bandwidth from the compute kernels, which slow down by ``COMPUTE_SLOWDOWN``; a collective running
  beside compute gets ``COMM_RATE_BESIDE_COMPUTE`` of its bandwidth.

The one entry point is :func:`data_parallel_comm`; traced models pass the gradients' ready times from
the trace (:func:`gradients_from_trace`), closed forms pass totals and a layer count
(:func:`even_gradients` spreads them).
"""

from __future__ import annotations

import math

from collections.abc import Sequence
from dataclasses import dataclass

from gpuwise.catalog.topology import Link, Topology, topology_for
from gpuwise.workload.parallelism import DEEPSPEED_REDUCE_BUCKET_ELEMENTS, PREFETCH_DEPTH
from gpuwise.workload import SHARDINGS

DDP_BUCKET_CAP_BYTES = 25 * 2**20        # torch DDP bucket_cap_mb=25
DDP_FIRST_BUCKET_BYTES = 1 * 2**20       # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DEEPSPEED_GRAD_BYTES = 2                 # DeepSpeed reduces fp16/bf16 gradients: its bucket in bytes
DEFAULT_LAYERS = 24                      # units when a caller knows neither gradients nor layers
# DDP's gradient copies: into the bucket, the 1/world division, back into .grad (read + write each).
DDP_COPY_PASSES = 6
# autograd's AccumulateGrad where the parameter's .grad exists already: ``grad += new`` (torch/csrc/autograd/functions/
# accumulate_grad.h), the op that completes each gradient of a micro-step after the first.
ACCUMULATE_GRAD_OP = "aten.add_.Tensor"
STREAM_BANDWIDTH_EFF = 0.75              # memory-bound copy kernels reach ~75% of datasheet bandwidth
# Contention (fitted by benchmarks/multi_gpu_accuracy.py with the link efficiencies, 2026-12-03).
COMPUTE_SLOWDOWN = 0.20
COMM_RATE_BESIDE_COMPUTE = 0.70


@dataclass(frozen=True)
class GradReady:
    """One gradient (or a group of them) complete during backward."""

    at_fraction: float     # share of one backward pass done when it is ready, 0..1
    size_bytes: float


@dataclass(frozen=True)
class Contention:
    compute_slowdown: float = COMPUTE_SLOWDOWN
    comm_rate: float = COMM_RATE_BESIDE_COMPUTE


@dataclass(frozen=True)
class CommTime:
    total_s: float        # every collective of one optimizer step, end to end, as if alone
    exposed_s: float      # what the step takes longer than its compute alone
    link: str             # the slowest link used: "nvswitch", "pcie-host", "ethernet", ...
    bus_gbs: float        # its bus bandwidth
    notes: tuple[str, ...] = ()
    buckets: int = 0      # DDP buckets (or ZeRO reduce buckets, or sharded units)
    nodes: int = 1


# -- collectives ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExposedParts:
    """What a data-parallel step adds to its compute, in two parts that sum to it.

    ``communication_s``: the links' estimate, the exposed time of the overlap model (``data_parallel_comm``).
    ``sharding_overhead_s``: what the weak-scaling floor adds beyond it. A step on N GPUs, each running the
    whole micro-batch, is never shorter than the same step on one GPU (speed-up <= N, issue 24). ZeRO/FSDP
    update 1/N of the optimizer state per rank, but they pay for it in collectives whose kernels take the
    GPU's memory bandwidth and SMs from that update and from compute; the overlap model counts the links'
    time only, so a saving past one GPU's step is taken as spent there (measured FSDP/ZeRO-3 scaling
    efficiencies are below 1: llm-train/). It is a floor, not a link estimate: reported as its own part
    (``StepTime.sharding_overhead_s``), never as communication."""

    communication_s: float
    sharding_overhead_s: float


def weak_scaling_parts(exposed_s: float, sharded_compute_s: float, one_gpu_compute_s: float) -> ExposedParts:
    """The links' exposed time, and the floor's excess: at least what sharding saved on compute
    (``one_gpu_compute_s - sharded_compute_s``) is added to the step, the links' part first."""
    floor_s = one_gpu_compute_s - sharded_compute_s
    return ExposedParts(communication_s=exposed_s, sharding_overhead_s=max(0.0, floor_s - exposed_s))


def _stage_s(kind: str, size_bytes: float, ranks: int, link) -> float:
    """One level (inside a node, or across nodes) of a collective over ``ranks`` peers on ``link``: a ring,
    ``2 (n-1)`` latency hops and ``2 (n-1)/n`` of the buffer through each link for an all-reduce (half
    of that for a reduce-scatter or all-gather); an all-reduce may instead take NCCL's tree, ``2 log2 n``
    hops and the buffer twice through each link, which NCCL picks for small buffers (its latency does not
    grow with n: a 64-byte-per-token decode all-reduce on 8 GPUs is no ring of 14 hops)."""
    bytes_per_s = link.bus_gbs * 1e9
    factor = 2 if kind == "all_reduce" else 1
    ring = factor * ((ranks - 1) / ranks * size_bytes / bytes_per_s + (ranks - 1) * link.latency_s)
    if kind != "all_reduce":
        return ring
    tree = 2 * (math.ceil(math.log2(ranks)) * link.latency_s + size_bytes / bytes_per_s)
    return min(ring, tree)


def collective_s(kind: str, size_bytes: float, count: int, topology: Topology, *,
                 graph_captured: bool = False) -> float:
    """Time of one collective (``all_reduce``, ``reduce_scatter``, ``all_gather``) of ``size_bytes``
    (the full, unsharded buffer) over ``count`` GPUs: the topology's latency per collective (NCCL's kernel
    launch and the ranks meeting, paid once whatever the hops) plus the faster of NCCL's ring and tree per
    level. The link constants are fitted on vidur's measured all-reduces (benchmarks/collectives.py).

    ``graph_captured``: the collective is replayed inside a CUDA graph (vLLM's decode): no host launch and
    no wait for the slowest rank's launch, so the per-collective latency, measured on eager calls, is not
    paid; the hops are."""
    if count <= 1 or size_bytes <= 0:
        return 0.0
    per_node = min(count, topology.gpus_per_node)
    nodes = topology.nodes(count)
    seconds = 0.0 if graph_captured else topology.collective_latency_s
    if per_node > 1:
        seconds += _stage_s(kind, size_bytes, per_node, topology.ring_link(per_node))
    if nodes > 1:
        seconds += _stage_s(kind, size_bytes, nodes, topology.network)
    return seconds


def slowest_link(count: int, topology: Topology) -> Link:
    inside = topology.ring_link(count)
    if topology.nodes(count) > 1 and topology.network.bus_gbs < inside.bus_gbs:
        return topology.network
    return inside


def topology_notes(count: int, topology: Topology) -> list[str]:
    """What a job on ``count`` GPUs should be told about their links, said once with its time (training and
    serving alike): several nodes and the network between them (the assumed one where the provider names
    none), or PCIe without peer-to-peer."""
    if count <= 1:
        return []
    if topology.nodes(count) > 1:
        return [f"{count} GPUs: {topology.describe(count)}" + (f"; {topology.note}" if topology.note else "")]
    if topology.ring_link(count).kind == "pcie-host":
        return [f"{count} GPUs without PCIe peer-to-peer: collectives go through host memory "
                f"(~{slowest_link(count, topology).bus_gbs:.0f} GB/s bus bandwidth)"]
    return []


# -- gradients and buckets -----------------------------------------------------------------------------
def gradients_from_trace(trace, backward_times_s: Sequence[float]) -> tuple[GradReady, ...] | None:
    """When each gradient of the traced step is ready, at the predicted time of the backward ops up to it:
    the allocation of every gradient storage in the measured backward; where the gradients were allocated
    before it (accumulation micro-steps, ``keep_grads``), AccumulateGrad's in-place add into each
    (``accumulated_gradients``), which is where DDP's hook fires then. ``backward_times_s`` are the predicted
    times of ``trace``'s backward ops, in trace order. None when the trace shows neither (no events)."""
    ends: dict[int, float] = {}
    elapsed, times = 0.0, iter(backward_times_s)
    for position, op in enumerate(trace.ops):
        if op.phase == "backward":
            elapsed += next(times, 0.0)
            ends[position] = elapsed
    if elapsed <= 0:
        return None
    ready = []
    for e in trace.events:
        if e.kind == "alloc" and e.category == "gradients" and e.op_index >= 0 and e.op_index in ends:
            ready.append(GradReady(min(1.0, ends[e.op_index] / elapsed), float(e.size_bytes)))
    if not ready:
        ready = [GradReady(min(1.0, ends[position] / elapsed), float(op.bytes_written))
                 for position, op in accumulated_gradients(trace)]
    return tuple(sorted(ready, key=lambda g: g.at_fraction)) or None


def accumulated_gradients(trace) -> list[tuple[int, object]]:
    """(position, op) of each AccumulateGrad into a gradient that is already allocated: an in-place add of two
    tensors of one shape in backward (``ACCUMULATE_GRAD_OP``), as autograd runs it from the second micro-step of
    an accumulation on (a first gradient is a detach of the new one instead, with its own allocation)."""
    return [(position, op) for position, op in enumerate(trace.ops)
            if op.phase == "backward" and op.op == ACCUMULATE_GRAD_OP and len(set(op.input_shapes)) == 1]


def even_gradients(grad_bytes: float, layers: int) -> tuple[GradReady, ...]:
    """``layers`` equal gradients, the k-th ready after k/layers of backward (closed forms)."""
    layers = max(1, int(layers))
    return tuple(GradReady((k + 1) / layers, grad_bytes / layers) for k in range(layers))


def ddp_buckets(gradients: Sequence[GradReady], *, cap_bytes: float = DDP_BUCKET_CAP_BYTES,
                first_cap_bytes: float = DDP_FIRST_BUCKET_BYTES) -> list[GradReady]:
    """DDP's buckets, in ready order: (ready when its last gradient is, its size)."""
    buckets: list[GradReady] = []
    size, ready, cap = 0.0, 0.0, first_cap_bytes
    for g in sorted(gradients, key=lambda g: g.at_fraction):
        size += g.size_bytes
        ready = max(ready, g.at_fraction)
        if size >= cap:
            buckets.append(GradReady(ready, size))
            size, cap = 0.0, cap_bytes
    if size > 0:
        buckets.append(GradReady(ready, size))
    return buckets


def _units(gradients: Sequence[GradReady], units: int) -> list[GradReady]:
    """Gradients grouped into ``units`` consecutive groups of about equal bytes (ZeRO-3/FSDP units)."""
    total = sum(g.size_bytes for g in gradients)
    target = total / max(1, units)
    return ddp_buckets(gradients, cap_bytes=target, first_cap_bytes=target) if total > 0 else []


# -- the timeline --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Unit:
    before_s: float    # collective that must finish before the compute (a parameter all-gather)
    compute_s: float
    after_s: float     # collective issued when the compute ends (a gradient all-reduce/reduce-scatter)


def overlapped_s(units: Sequence[_Unit], contention: Contention, prefetch_depth: int = PREFETCH_DEPTH) -> float:
    """Wall time of compute units on one stream and their collectives on another (issued in order,
    run one at a time), with contention while both run. The ``before`` collective of unit j is
    issued once unit j - depth - 1 has finished (its gathered parameters freed)."""
    n = len(units)
    queue: list[list] = []        # [remaining_s, unit, is_before]
    issued_before = [False] * n
    before_done = [u.before_s <= 0 for u in units]

    def issue_before(j: int) -> None:
        if 0 <= j < n and not issued_before[j]:
            issued_before[j] = True
            if units[j].before_s > 0:
                queue.append([units[j].before_s, j, True])

    for j in range(min(n, prefetch_depth + 1)):
        issue_before(j)
    t, k, running = 0.0, 0, None   # running: remaining compute of unit k
    slow, rate = 1.0 + contention.compute_slowdown, contention.comm_rate
    while k < n or queue:
        if running is None and k < n and before_done[k]:
            running = units[k].compute_s
        comm = queue[0] if queue else None
        if running is None and comm is None:
            break   # nothing can run (cannot happen with a consistent issue order)
        compute_rate = 1.0 / slow if comm is not None else 1.0
        comm_rate = rate if running is not None else 1.0
        steps = []
        if running is not None:
            steps.append(running / compute_rate)
        if comm is not None:
            steps.append(comm[0] / comm_rate)
        dt = min(steps)
        t += dt
        if running is not None:
            running -= dt * compute_rate
        if comm is not None:
            comm[0] -= dt * comm_rate
            if comm[0] <= 1e-15:
                queue.pop(0)
                if comm[2]:
                    before_done[comm[1]] = True
        if running is not None and running <= 1e-15:
            running = None
            if units[k].after_s > 0:
                queue.append([units[k].after_s, k, False])
            issue_before(k + prefetch_depth + 1)
            k += 1
    return t


# -- the one entry point -------------------------------------------------------------------------------
def data_parallel_comm(
    *, sharding: str, count: int, gpu, grad_bytes: float, param_bytes: float,
    forward_s: float, backward_s: float, gradients: Sequence[GradReady] | None = None,
    layers: int | None = None, micro_steps: int = 1, topology: Topology | None = None,
    provider: str | None = None, contention: Contention = Contention(),
) -> CommTime:
    """Collectives of one optimizer step of data parallelism over ``count`` GPUs, and what is exposed.

    ``grad_bytes``: gradients synchronised per step (as stored: fp32 under AMP); ``param_bytes``: the
    parameters ZeRO gathers (in the compute dtype). ``forward_s``/``backward_s``: one micro-step on one
    GPU. ``gradients``: when each is ready in backward (from :func:`gradients_from_trace`); without
    them ``layers`` equal ones (:func:`even_gradients`), ``DEFAULT_LAYERS`` if no count is known.
    ``topology`` (else ``topology_for(gpu, provider)``) says how the GPUs are linked.
    """
    if sharding not in SHARDINGS:
        raise ValueError(f"unknown sharding {sharding!r} (known: {', '.join(SHARDINGS)})")
    topo = topology or topology_for(gpu, provider)
    link = slowest_link(count, topo)
    if count <= 1 or (grad_bytes <= 0 and param_bytes <= 0):
        return CommTime(0.0, 0.0, link.kind, link.bus_gbs)
    notes = topology_notes(count, topo)
    if not gradients or sum(g.size_bytes for g in gradients) <= 0:
        gradients = even_gradients(grad_bytes, layers or DEFAULT_LAYERS)
    else:   # scale to the bytes the caller synchronises (the trace's own may differ in dtype)
        traced = sum(g.size_bytes for g in gradients)
        gradients = [GradReady(g.at_fraction, g.size_bytes * grad_bytes / traced) for g in gradients]
    micro_steps = max(1, micro_steps)

    def ar(size):
        return collective_s("all_reduce", size, count, topo)

    def rs(size):
        return collective_s("reduce_scatter", size, count, topo)

    def ag(size):
        return collective_s("all_gather", size, count, topo)

    if sharding == "ddp":
        buckets = ddp_buckets(gradients)
        units = _backward_units(buckets, backward_s, ar)
        copy_s = DDP_COPY_PASSES * grad_bytes / (gpu.memory_bandwidth_gbs * 1e9 * STREAM_BANDWIDTH_EFF)
        exposed = overlapped_s(units, contention) - backward_s + copy_s
        total = sum(u.after_s for u in units)
        return CommTime(total, max(0.0, exposed), link.kind, link.bus_gbs, tuple(notes), len(buckets), topo.nodes(count))
    if sharding in ("zero1", "zero2"):
        cap = DEEPSPEED_REDUCE_BUCKET_ELEMENTS * DEEPSPEED_GRAD_BYTES
        buckets = ddp_buckets(gradients, cap_bytes=cap, first_cap_bytes=cap)
        units = _backward_units(buckets, backward_s, rs)
        reduces = micro_steps if sharding == "zero2" else 1
        gather = ag(param_bytes)
        exposed = reduces * (overlapped_s(units, contention) - backward_s) + gather
        total = reduces * sum(u.after_s for u in units) + gather
        return CommTime(total, max(0.0, exposed), link.kind, link.bus_gbs, tuple(notes), len(buckets), topo.nodes(count))
    # zero3 / fsdp: units = layers, gathered for forward and for backward, gradients reduce-scattered
    n_units = layers or max(1, len(_units(gradients, DEFAULT_LAYERS)))
    grads = _units(gradients, n_units)
    share = [g.size_bytes / grad_bytes if grad_bytes else 1.0 / len(grads) for g in grads]
    bwd = _backward_units(grads, backward_s, rs)
    bwd = [_Unit(ag(param_bytes * s), u.compute_s, u.after_s) for u, s in zip(bwd, share + [0.0] * len(bwd))]
    fwd = [_Unit(ag(param_bytes * s), forward_s * s, 0.0) for s in reversed(share)]
    exposed = micro_steps * (overlapped_s(fwd, contention) - forward_s + overlapped_s(bwd, contention) - backward_s)
    total = micro_steps * (sum(u.before_s + u.after_s for u in bwd) + sum(u.before_s for u in fwd))
    return CommTime(total, max(0.0, exposed), link.kind, link.bus_gbs, tuple(notes), len(grads), topo.nodes(count))


def _backward_units(buckets: Sequence[GradReady], backward_s: float, collective) -> list[_Unit]:
    """Backward cut at each bucket's ready time; the bucket's collective follows its piece."""
    units, done = [], 0.0
    for b in buckets:
        at = min(1.0, max(done, b.at_fraction))
        units.append(_Unit(0.0, (at - done) * backward_s, collective(b.size_bytes)))
        done = at
    if done < 1.0:
        units.append(_Unit(0.0, (1.0 - done) * backward_s, 0.0))
    return units
