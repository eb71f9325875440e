"""One model of a workload that answers "how much memory, how long" for any GPU, count and batch.

The expensive part, tracing, is done once per batch size and reused across every GPU and count
(memory and per-operator costs depend on the GPU only through cheap arithmetic). Decoder LLMs take
the closed-form path (``gpuwise.plan.llm``), which needs no trace at all.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Callable, Protocol

from gpuwise.catalog.model import GPU
from gpuwise.catalog.topology import Topology, topology_for
from gpuwise.memory.model import MemoryEstimate
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION, fits, largest_fitting, usable_bytes
from gpuwise.runtime.model import StepTime
from gpuwise.trace.records import Trace
from gpuwise.workload import Workload

MAX_AUTO_BATCH = 4096

# What the user's own measured runs taught (gpuwise.calibrate: per GPU × operator-class factors, a host
# term, a memory offset), applied to every estimate on a GPU it knows. Set by the CLI, which knows
# both parts; None: the shipped model.
_correction: Callable[["Estimate"], "Estimate"] | None = None


def use_correction(correction: Callable[["Estimate"], "Estimate"] | None):
    """Apply ``correction`` to every estimate from now on (None: none); returns the previous one."""
    global _correction
    previous, _correction = _correction, correction
    return previous


def _corrected(est: "Estimate") -> "Estimate":
    return est if _correction is None or est.gpu is None else _correction(est)


@dataclass(frozen=True)
class Estimate:
    """Memory and time of one step of a workload on ``count`` GPUs of one kind (memory per GPU)."""

    workload: Workload
    gpu: GPU | None          # None: memory only, with a typical CUDA context
    count: int
    memory: MemoryEstimate
    time: StepTime | None
    inference: object | None = None   # gpuwise.plan.llm.InferenceEstimate, for LLM serving
    calibration: str | None = None    # "calibrated with 3 of your runs on rtx-4090"; None: the shipped model

    @property
    def fits(self) -> bool | None:
        """None without a GPU; else the one fit rule at the default headroom."""
        return None if self.gpu is None else fits(self.memory.total_upper_bytes, self.gpu)



class WorkloadModel(Protocol):
    workload: Workload
    method: str  # "traced" or "closed-form"

    def estimate(
        self, gpu: GPU | None, *, count: int = 1, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None, provider: str | None = None,
    ) -> Estimate:
        """``count`` GPUs like ``gpu`` in ``provider``'s machines (None: the GPU's usual machine, no
        cluster network): the provider's topology sets the links time and memory use."""
        ...


def _topology(gpu: GPU | None, provider: str | None) -> Topology | None:
    """Where the GPUs are, resolved once per estimate: the one topology its memory and time use."""
    return topology_for(gpu, provider) if gpu is not None else None


class TracedModel:
    """Traces the real model on fake tensors, once per batch size, and reuses the trace."""

    method = "traced"

    def __init__(self, workload: Workload, progress: Callable[[str], None] | None = None) -> None:
        if workload.offload != "none":
            logging.getLogger(__name__).warning(
                "--offload %s is modelled for decoder LLMs (the closed form) only: the traced estimate keeps "
                "everything on the GPU", workload.offload)
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
        grad_accum_steps: int | None = None, provider: str | None = None,
    ) -> Estimate:
        from gpuwise.memory import estimate_memory
        from gpuwise.runtime import predict_step_time

        accum = grad_accum_steps or self.workload.grad_accum_steps
        topo = _topology(gpu, provider)
        trace = self.trace(batch_size, accum)
        memory = _data_parallel(estimate_memory(trace, gpu), trace, topo, count)
        trace = self._accumulated(trace, accum)
        step = predict_step_time(trace, gpu, count=count, topology=topo) if with_time and gpu is not None else None
        return _corrected(Estimate(trace.workload.with_(num_gpus=count), gpu, count, memory, step))


def _data_parallel(memory, trace: Trace, topology: Topology | None, count: int):
    """The traced single-GPU peak plus what ``count``-way data parallelism adds (buckets, NCCL buffers,
    ZeRO/FSDP gathers) and removes (the shards it does not hold): ``gpuwise.memory.parallel``.
    ``topology``: how the GPUs are linked (None: no GPU named, a PCIe box)."""
    wl = trace.workload
    if count <= 1 or not wl.is_training or trace.trainable_param_count == 0:
        return memory
    from gpuwise.memory.parallel import data_parallel_memory, ring_of, with_data_parallel
    from gpuwise.runtime.comm import DEFAULT_LAYERS
    from gpuwise.workload.storage import trainable_bytes

    grad_bytes = trace.trainable_param_count * trainable_bytes(wl.precision)
    link, multi_node = ring_of(topology, count)
    parallel = data_parallel_memory(
        sharding=wl.sharding, count=count, weights_bytes=memory.weights_bytes, gradients_bytes=grad_bytes,
        optimizer_bytes=memory.optimizer_bytes, layers=DEFAULT_LAYERS, link_kind=link, multi_node=multi_node,
    )
    return with_data_parallel(memory, parallel, count, wl.sharding)


class ClosedFormLlmModel:
    """Decoder LLMs: architecture arithmetic, no trace (seconds for 70B+ models and sweeps)."""

    method = "closed-form"

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    def estimate(
        self, gpu: GPU | None, *, count: int = 1, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None, provider: str | None = None,
    ) -> Estimate:
        from gpuwise.plan.llm import estimate_llm

        w = self.workload.with_(batch_size=batch_size or self.workload.batch_size, num_gpus=count,
                                grad_accum_steps=grad_accum_steps or self.workload.grad_accum_steps)
        result = estimate_llm(w, gpu, topology=_topology(gpu, provider))
        return _corrected(Estimate(w, gpu, count, result.memory, result.time, getattr(result, "inference", None)))


def model_for(workload: Workload, progress: Callable[[str], None] | None = None) -> WorkloadModel:
    """The closed form for decoder LLMs (any size), the trace for everything else."""
    from gpuwise.workload.decoder import is_llm

    if is_llm(workload):
        return ClosedFormLlmModel(workload)
    return TracedModel(workload, progress)


def largest_fitting_batch(
    model: WorkloadModel, gpu: GPU, *, count: int = 1, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION,
    limit: int = MAX_AUTO_BATCH, powers_of_two: bool | None = None, provider: str | None = None,
) -> int:
    """The largest micro-batch that fits ``count`` of ``gpu`` at ``provider`` (0 when batch 1 does not),
    by the one search of ``gpuwise.plan.fit``. Traced models search powers of two by default (each new batch is a trace;
    the grid is shared by every GPU of a recommendation); the closed form searches every integer."""
    if powers_of_two is None:
        powers_of_two = model.method == "traced"

    def total_bytes(batch: int) -> int:
        return model.estimate(gpu, count=count, batch_size=batch, with_time=False,
                              provider=provider).memory.total_upper_bytes

    return largest_fitting(total_bytes, usable_bytes(gpu, headroom_fraction), upper=limit, powers_of_two=powers_of_two)


def cannot_run(workload: Workload, gpu: GPU) -> str | None:
    """Why ``workload`` cannot run on ``gpu`` (None: it can): bf16 needs bf16 support (Ampere and newer;
    PyTorch refuses bf16 autocast on a T4 or V100). The one rule estimate, recommend and the time
    scaling of report and advise apply."""
    if workload.precision in ("amp-bf16", "bf16") and not gpu.has_bf16:
        return f"no bf16 on this GPU ({gpu.arch}): use --precision {fp16_instead(workload.precision)}"
    return None


def fp16_instead(precision: str) -> str:
    """The fp16 twin of a bf16 precision (amp-bf16 -> amp-fp16, bf16 -> fp16), what a job runs at on a GPU
    without bf16; other precisions are their own."""
    return {"amp-bf16": "amp-fp16", "bf16": "fp16"}.get(precision, precision)


def step_time_function(workload: Workload, progress: Callable[[str], None] | None = None):
    """GPU -> predicted step time (s) of ``workload`` on ``workload.num_gpus`` of that GPU, or None
    where it cannot run there (amp-bf16 without bf16). One trace (or none, for LLMs), cached per GPU:
    the right-sizing report and the advice use it when the job's workload is known."""
    model = model_for(workload, progress)
    cache: dict[str, float | None] = {}

    def step_time_s(gpu: GPU) -> float | None:
        if gpu.id not in cache:
            if cannot_run(workload, gpu):
                cache[gpu.id] = None
            else:
                est = model.estimate(gpu, count=workload.num_gpus)
                cache[gpu.id] = est.time.step_time_s if est.time is not None else None
        return cache[gpu.id]

    return step_time_s
