"""The upper side of a memory estimate: what is guessed rather than modelled, and how much it may add.

``total_bytes`` is the best estimate; ``total_upper_bytes`` adds, part by part, how far each guessed
figure could be off on the high side (docs/memory.md, "Where each constant comes from", gives the
sources and why these spreads). A renter's "fits" uses the upper side (gpuwise.plan.fit callers);
the wording (:func:`fit_wording`) says when a job fits only inside the uncertainty.

What is modelled (no spread): the caching allocator's rounding and segments (its source), the
cuBLAS workspace (torch's default ``CUBLAS_WORKSPACE_CONFIG``), the tensors autograd keeps.
"""

from __future__ import annotations

from gpuwise.memory.cuda import CONV_WORKSPACE_CAP_BYTES
from gpuwise.memory.model import MemoryEstimate
from gpuwise.units import format_bytes

GIB = 1 << 30

# CUDA context + lazily loaded kernels: typical figures per generation, no primary source;
# drivers, CUDA versions and the kernels a model touches move them by about this share.
CONTEXT_SPREAD = 0.30
# Traced path: the allocator model has one stream and no record_stream / NCCL / graph pools.
TRACED_RESERVED_SPREAD = 0.03
# Closed form (LLMs): allocated bytes were at most 3.6% under LitGPT's measurements on held-out rows
# (benchmarks/results/llm.md); the upper side allows 5% of what is not weights.
CLOSED_FORM_ACTIVATION_SPREAD = 0.05
# Closed form: reserved = allocated + 15% of the churning part is a guess; varied-length batches
# fragment more (reserved 20-30% above allocated is commonly reported): +10% of that part.
CLOSED_FORM_RESERVE_SPREAD = 0.10


def traced_uncertainty(*, context_bytes: int, peak_reserved_bytes: int, uses_cudnn_conv: bool) -> tuple[tuple[str, int], ...]:
    """Upper-side spreads of a traced estimate, by what is guessed."""
    parts = [("cuda_context", int(context_bytes * CONTEXT_SPREAD)),
             ("allocator", int(peak_reserved_bytes * TRACED_RESERVED_SPREAD))]
    if uses_cudnn_conv:
        # cuDNN's workspace is a guess (a quarter of the larger operand, capped); the heuristics may
        # pick an algorithm asking for up to the cap at the peak
        parts.append(("cudnn_workspace", CONV_WORKSPACE_CAP_BYTES))
    return tuple(parts)


def closed_form_uncertainty(*, context_bytes: int, allocated_bytes: int, weights_bytes: int,
                            dynamic_bytes: int) -> tuple[tuple[str, int], ...]:
    """Upper-side spreads of a closed-form (LLM) estimate."""
    return (("cuda_context", int(context_bytes * CONTEXT_SPREAD)),
            ("activations", int(max(allocated_bytes - weights_bytes, 0) * CLOSED_FORM_ACTIVATION_SPREAD)),
            ("fragmentation", int(max(dynamic_bytes, 0) * CLOSED_FORM_RESERVE_SPREAD)))


def fit_verdict(memory: MemoryEstimate, usable_bytes: int) -> str:
    """"fits" (the upper side is within ``usable_bytes``), "tight" (only the estimate's total is) or
    "no": the one reading of an estimate's range against a GPU, for ``fit_wording`` and recommend's reasons."""
    if memory.total_upper_bytes <= usable_bytes:
        return "fits"
    return "tight" if memory.total_bytes <= usable_bytes else "no"


def usable_words(usable_bytes: int, gpu_memory_bytes: int | None = None, headroom_fraction: float | None = None) -> str:
    """'22.8 GiB usable with 5% of its 24.0 GiB kept free': the one phrase for the memory a need is judged against,
    said by estimate's fit line, recommend's Best line and remedies. ``usable_bytes`` is ``plan.fit.usable_of`` of
    ``gpu_memory_bytes`` (as the driver reports it) at ``headroom_fraction``; without those two, '22.8 GiB usable'."""
    usable = f"{format_bytes(usable_bytes)} usable"
    if gpu_memory_bytes is None or headroom_fraction is None:
        return usable
    return f"{usable} with {headroom_fraction * 100:g}% of its {format_bytes(gpu_memory_bytes)} kept free"


def fit_wording(memory: MemoryEstimate, usable_bytes: int, gpu_memory_bytes: int | None = None,
                headroom_fraction: float | None = None) -> str:
    """One line for a renter: "fits with X GiB to spare", "tight: within the uncertainty …" or
    "does not fit …", against ``usable_bytes`` (the GPU's memory less the headroom: plan.fit), said as
    :func:`usable_words` says it (with the GPU's memory and the headroom where they are given)."""
    low, high = memory.total_bytes, memory.total_upper_bytes
    usable = usable_words(usable_bytes, gpu_memory_bytes, headroom_fraction)
    verdict = fit_verdict(memory, usable_bytes)
    if verdict == "fits":
        # the low end is the estimate's total (the number its table shows), the high end adds what is guessed
        needs = f"{low / GIB:.1f}–{high / GIB:.1f}" if f"{low / GIB:.1f}" != f"{high / GIB:.1f}" else f"{high / GIB:.1f}"
        return f"fits with {(usable_bytes - high) / GIB:.1f} GiB to spare (needs {needs} of {usable})"
    if verdict == "tight":
        return (f"tight: within the uncertainty (needs {low / GIB:.1f}–{high / GIB:.1f} GiB of {usable}); "
                "a smaller batch or more headroom makes it safe")
    return f"does not fit: needs {low / GIB:.1f} GiB (up to {high / GIB:.1f}) of {usable}"
