"""Peak GPU memory of a traced step: CUDA rules, then the caching allocator, then the context."""

from __future__ import annotations

import gc
from contextlib import contextmanager
import weakref
from typing import Iterator

from gpuwise.catalog.model import GPU, not_a_gpu
from gpuwise.memory.adjust import cuda_events
from gpuwise.memory.allocator import AllocatorConfig
from gpuwise.memory.cuda import CONV_OPS, CudaStack, op_packet
from gpuwise.memory.model import MemoryError_, MemoryEstimate
from gpuwise.memory.replay import replay
from gpuwise.memory.uncertainty import traced_uncertainty
from gpuwise.trace.records import Trace

TOP_MODULES = 10
PEAK_PHASE_NOTE = "peak during the {phase} phase"   # the phase of the traced step where memory peaks
_ACTIVATION_CATEGORIES = ("activations", "inputs")   # the input batch is reported with activations

# A traced estimate without a GPU: what its memory assumes (the CLI words it for `estimate --gpu all`)
NO_GPU_NOTE = "no GPU given: CUDA context and kernels of an Ampere GPU (A100) with CUDA 12 assumed"


def estimate_memory(trace: Trace, gpu: GPU | None = None, *, expandable_segments: bool = False) -> MemoryEstimate:
    """Peak memory of the trace's step on one ``gpu`` (a catalog GPU; None: an A100-class GPU).

    The breakdown sums to ``peak_allocated_bytes``; ``total_bytes`` = peak reserved + CUDA context;
    ``total_upper_bytes`` adds what the guessed parts may add (memory/uncertainty.py).
    Inputs (the batch) count as activations; categories the trace does not know count as other.
    """
    if (why := not_a_gpu(gpu, optional=True)) is not None:
        raise MemoryError_(why)
    stack = CudaStack.for_gpu(gpu)
    with _no_gc():
        adjusted, result = _replayed(trace, stack, expandable_segments)
        context_bytes = stack.context_bytes(uses_cublas=adjusted.uses_cublas, uses_cudnn=adjusted.uses_cudnn)
        capacity = gpu.memory_bytes - context_bytes if gpu is not None else None
        if capacity is not None and result.peak_reserved_bytes > capacity:
            # Only a GPU too small for the cache-everything run makes the allocator release its cache.
            config = AllocatorConfig(expandable_segments=expandable_segments, capacity_bytes=capacity)
            result = replay(adjusted.events, config)

    cats = dict(result.category_bytes_at_peak)
    weights = cats.pop("weights", 0)
    gradients = cats.pop("gradients", 0)
    optimizer = cats.pop("optimizer", 0)
    activations = sum(cats.pop(c, 0) for c in _ACTIVATION_CATEGORIES)
    workspace = cats.pop("workspace", 0)
    other = sum(cats.values())

    # Top modules where activations peak (at the overall peak they may all be freed already:
    # an AdamW step often peaks after the backward).
    per_module = []
    for module, by_cat in result.module_bytes_at_activation_peak.items():
        nbytes = sum(by_cat.get(c, 0) for c in _ACTIVATION_CATEGORIES)
        if nbytes > 0:
            per_module.append((module or "(top level)", nbytes))
    per_module.sort(key=lambda mb: -mb[1])

    notes = list(adjusted.notes) + list(result.notes)
    if 0 <= result.peak_index < len(adjusted.events):
        notes.append(PEAK_PHASE_NOTE.format(phase=adjusted.events[result.peak_index].phase))
    if stack.assumed:
        notes.append(NO_GPU_NOTE)
    if expandable_segments:
        notes.append("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    if result.cache_flush_count:
        notes.append(f"the allocator ran out of memory and released its cache {result.cache_flush_count} time(s)")
    if result.oom_count:
        notes.append(f"out of memory on {gpu.id}: {result.oom_count} allocation(s) would fail")
    return MemoryEstimate(
        peak_allocated_bytes=result.peak_allocated_bytes,
        peak_reserved_bytes=result.peak_reserved_bytes,
        cuda_context_bytes=context_bytes,
        total_bytes=result.peak_reserved_bytes + context_bytes,
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=optimizer,
        activations_bytes=activations,
        workspace_bytes=workspace,
        other_bytes=other,
        top_modules=tuple(per_module[:TOP_MODULES]),
        timeline=result.timeline,
        notes=tuple(notes),
        uncertainty=traced_uncertainty(
            context_bytes=context_bytes, peak_reserved_bytes=result.peak_reserved_bytes,
            uses_cudnn_conv=any(op_packet(o.op) in CONV_OPS for o in trace.ops)),
    )


@contextmanager
def _no_gc() -> Iterator[None]:
    """The replay makes many small objects and frees none: a cyclic GC pass over a just-traced
    model's object graph would cost more than the replay itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# One replay per (trace, GPU generation): a recommendation asks for the same trace on dozens of GPUs,
# which differ only in context size unless they are too small for the step.
_REPLAYS: dict[tuple[int, CudaStack, bool], tuple] = {}


def _replayed(trace: Trace, stack: CudaStack, expandable_segments: bool):
    key = (id(trace), stack, expandable_segments)
    hit = _REPLAYS.get(key)
    if hit is None:
        adjusted = cuda_events(trace, stack)
        result = replay(adjusted.events, AllocatorConfig(expandable_segments=expandable_segments, capacity_bytes=None))
        if not any(k[0] == id(trace) for k in _REPLAYS):
            weakref.finalize(trace, _forget, id(trace))
        hit = _REPLAYS[key] = (adjusted, result)
    return hit


def _forget(trace_id: int) -> None:
    for key in [k for k in _REPLAYS if k[0] == trace_id]:
        del _REPLAYS[key]
