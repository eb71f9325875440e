"""One model of a workload that answers "how much memory, how long" for any GPU, count and batch.

The expensive part, tracing, is done once per batch size and reused across every GPU and count
(memory and per-operator costs depend on the GPU only through cheap arithmetic). Decoder LLMs take
the closed-form path of ``gpuwise.llm``, which needs no trace at all.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Protocol

from gpuwise.catalog.model import GPU
from gpuwise.memory.model import MemoryEstimate
from gpuwise.runtime.model import StepTime
from gpuwise.trace.records import Trace
from gpuwise.workload import Workload

MAX_AUTO_BATCH = 4096


@dataclass(frozen=True)
class Estimate:
    """Memory and time of one step of a workload on ``count`` GPUs of one kind (memory per GPU)."""

    workload: Workload
    gpu: GPU | None          # None: memory only, with a typical CUDA context
    count: int
    memory: MemoryEstimate
    time: StepTime | None
    inference: object | None = None   # gpuwise.llm's inference extras, for LLM serving


class WorkloadModel(Protocol):
    workload: Workload
    method: str  # "traced" or "closed-form"

    def estimate(
        self, gpu: GPU | None, *, count: int = 1, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None,
    ) -> Estimate: ...


class TracedModel:
    """Traces the real model on fake tensors, once per batch size, and reuses the trace."""

    method = "traced"

    def __init__(self, workload: Workload, progress: Callable[[str], None] | None = None) -> None:
        self.workload = workload
        self._traces: dict[tuple[int, int], Trace] = {}
        self._accumulated_traces: dict[tuple[int, int], Trace] = {}
        self._progress = progress or (lambda _msg: None)

    def trace(self, batch_size: int | None = None, grad_accum_steps: int | None = None) -> Trace:
        """The trace at this micro-batch. Accumulation matters to memory only as "1 or more": from the
        second micro-batch on, the previous gradients stay allocated; 2 stands for every count above 1."""
        from gpuwise.trace import trace_workload

        b = batch_size or self.workload.batch_size
        accum = grad_accum_steps or self.workload.grad_accum_steps
        key = (b, min(accum, 2))
        if key not in self._traces:
            self._progress(f"tracing {self.workload.model} at batch {b}")
            self._traces[key] = trace_workload(self.workload.with_(batch_size=b, grad_accum_steps=key[1], num_gpus=1))
        return self._traces[key]

    def _accumulated(self, trace: Trace, grad_accum_steps: int) -> Trace:
        """The same trace under another accumulation count: it changes the step's time, not its memory."""
        if trace.workload.grad_accum_steps == grad_accum_steps:
            return trace
        key = (trace.samples_per_step, grad_accum_steps)
        if key not in self._accumulated_traces:
            self._accumulated_traces[key] = dataclasses.replace(
                trace, workload=trace.workload.with_(grad_accum_steps=grad_accum_steps))
        return self._accumulated_traces[key]

    def estimate(
        self, gpu: GPU | None, *, count: int = 1, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None,
    ) -> Estimate:
        from gpuwise.memory import estimate_memory
        from gpuwise.runtime import predict_step_time

        accum = grad_accum_steps or self.workload.grad_accum_steps
        trace = self.trace(batch_size, accum)
        memory = estimate_memory(trace, gpu)
        trace = self._accumulated(trace, accum)
        step = predict_step_time(trace, gpu, count=count) if with_time and gpu is not None else None
        return Estimate(trace.workload.with_(num_gpus=count), gpu, count, memory, step)


class ClosedFormLlmModel:
    """Decoder LLMs: architecture arithmetic, no trace (seconds for 70B+ models and sweeps)."""

    method = "closed-form"

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    def estimate(
        self, gpu: GPU | None, *, count: int = 1, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None,
    ) -> Estimate:
        from gpuwise.llm import estimate_llm

        w = self.workload.with_(batch_size=batch_size or self.workload.batch_size, num_gpus=count,
                                grad_accum_steps=grad_accum_steps or self.workload.grad_accum_steps)
        result = estimate_llm(w, gpu)
        return Estimate(w, gpu, count, result.memory, result.time, getattr(result, "inference", None))


def model_for(workload: Workload, progress: Callable[[str], None] | None = None) -> WorkloadModel:
    """The closed form for decoder LLMs (any size), the trace for everything else."""
    from gpuwise.llm import is_llm

    if is_llm(workload):
        return ClosedFormLlmModel(workload)
    return TracedModel(workload, progress)


def fits(estimate: Estimate, headroom_fraction: float) -> bool:
    return estimate.memory.total_bytes <= usable_bytes(estimate.gpu, headroom_fraction)


def usable_bytes(gpu: GPU, headroom_fraction: float) -> int:
    """What a job may plan to use: the memory the driver reports (less than the nominal size, e.g.
    15360 MiB on a 16 GiB T4) less a safety margin for fragmentation and drift."""
    return int(gpu.visible_memory_bytes * (1.0 - headroom_fraction))


def largest_fitting_batch(
    model: WorkloadModel, gpu: GPU, *, count: int = 1, headroom_fraction: float = 0.05,
    limit: int = MAX_AUTO_BATCH,
) -> int:
    """The largest power-of-two micro-batch that fits, or 0 when batch 1 does not.

    Memory is close to affine in the batch: two estimates give the slope, the line gives the
    candidate, and the candidate is verified (and halved until it fits), so a whole catalog needs a
    handful of traces, not one per GPU and batch.
    """
    budget = usable_bytes(gpu, headroom_fraction)

    def total_bytes(batch: int) -> int:
        return model.estimate(gpu, count=count, batch_size=batch, with_time=False).memory.total_bytes

    m_1 = total_bytes(1)
    if m_1 > budget:
        return 0
    probe = 8 if total_bytes(8) <= budget else 2
    slope = max(total_bytes(probe) - m_1, 1) / (probe - 1)
    guess = 1 + (budget - m_1) / slope
    candidate = min(limit, 1 << max(0, int(math.floor(math.log2(max(guess, 1))))))
    while candidate > 1 and total_bytes(candidate) > budget:
        candidate //= 2
    # The line can be pessimistic (allocator rounding at small batches): climb while it still fits.
    while candidate * 2 <= limit and total_bytes(candidate * 2) <= budget:
        candidate *= 2
    return candidate


def step_time_function(workload: Workload, progress: Callable[[str], None] | None = None):
    """GPU -> predicted step time (s) of ``workload`` on ``workload.num_gpus`` of that GPU, or None
    where it cannot run there (amp-bf16 without bf16). One trace (or none, for LLMs), cached per GPU:
    the right-sizing report and the advice use it when the job's workload is known."""
    model = model_for(workload, progress)
    cache: dict[str, float | None] = {}

    def step_time_s(gpu: GPU) -> float | None:
        if gpu.id not in cache:
            if workload.precision == "amp-bf16" and not gpu.has_bf16:
                cache[gpu.id] = None
            else:
                est = model.estimate(gpu, count=workload.num_gpus)
                cache[gpu.id] = est.time.step_time_s if est.time is not None else None
        return cache[gpu.id]

    return step_time_s
