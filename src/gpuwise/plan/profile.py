"""One model of a workload that answers "how much memory, how long" for any GPU, count and batch.

The expensive part, tracing, is done once per batch size and reused across every GPU and count
(memory and per-operator costs depend on the GPU only through cheap arithmetic). Decoder LLMs take
the closed-form path (``gpuwise.plan.llm``), which needs no trace at all.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Callable, Protocol

from gpuwise.catalog.model import GPU, not_a_gpu
from gpuwise.catalog.resolve import mig_count_refusal
from gpuwise.catalog.topology import Topology, topology_for
from gpuwise.memory import estimate_memory
from gpuwise.memory.model import MemoryEstimate
from gpuwise.memory.uncertainty import fit_verdict, fit_wording, usable_words
from gpuwise.memory.parallel import ModelState, data_parallel_memory, held_throughout, ring_of, with_data_parallel
from gpuwise.plan.errors import PlanError
from gpuwise.plan import reasons
from gpuwise.plan.fit import CHECKED_BELOW, DEFAULT_HEADROOM_FRACTION, fits, largest_fitting, spare_bytes, usable_bytes
from gpuwise.plan.generation import generates, generation_arch, traced_generation
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime import predict_step_time
from gpuwise.runtime.comm import DEFAULT_LAYERS
from gpuwise.runtime.model import StepTime
from gpuwise.runtime.quant_linears import quant_refusal
from gpuwise.trace import trace_workload
from gpuwise.trace.records import Trace
from gpuwise.units import format_bytes
from gpuwise.workload import Workload
from gpuwise.workload.decoder import is_llm, load_arch
from gpuwise.workload.llm_config import request_rate_refusal
from gpuwise.workload.precision import on_gpu, why_not_on
from gpuwise.workload.checkpoint import served_scheme
from gpuwise.workload.storage import WEIGHT_ONLY_QUANTS, trainable_bytes
from gpuwise.workload.parallelism import splits_layers

MAX_AUTO_BATCH = 4096

# What the user's own measured runs taught (gpuwise.calibrate: per GPU × operator-class factors, a host
# term, a memory offset), applied to every estimate of a model on a GPU it knows. An argument of the
# model (``model_for(..., correction=)``), never a global: the CLI loads it and passes it; None: the
# shipped model.
Correction = Callable[["Estimate"], "Estimate"]


def _corrected(est: "Estimate", correction: Correction | None) -> "Estimate":
    return est if correction is None or est.gpu is None else correction(est)


def workload_on(workload: Workload, gpu: GPU | None) -> Workload:
    """The job as it runs on ``gpu``: where its precision was the default rule's bf16 and the GPU has
    none, at the fp16 twin (``gpuwise.workload.precision.on_gpu``); otherwise the workload itself."""
    if gpu is None or not workload.precision_default:
        return workload
    p = on_gpu(workload.precision, gpu.has_bf16, defaulted=True)
    return workload if p.name == workload.precision else workload.with_(precision=p.name)


@dataclass(frozen=True)
class Estimate:
    """Memory and time of one step of a workload on ``count`` GPUs of one kind (memory per GPU). ``runs``
    answers whether the job runs there: False where it cannot run at all (``cannot_run`` says why: bf16 on a
    GPU without it; ``time`` is then what the model computes, not a step the GPU runs) or its memory does not
    fit (``fits``, the memory rule every command shares)."""

    workload: Workload
    gpu: GPU | None          # None: memory only, with a typical CUDA context
    count: int
    memory: MemoryEstimate
    time: StepTime | None
    inference: object | None = None   # gpuwise.plan.llm.InferenceEstimate, for LLM serving
    calibration: str | None = None    # "calibrated with 3 of your runs on rtx-4090"; None: the shipped model
    calibration_carried_from: str | None = None  # the GPU whose calibration this one carries (none of its own)
    cpu_offload_bytes: int = 0        # --offload: host RAM the offloaded state takes, all GPUs together (LLMs)
    spillable_bytes: int = 0          # paged optimizer state that may move to CPU RAM under pressure, per GPU

    @property
    def cannot_run(self) -> str | None:
        """Why the job cannot run on the GPU (``cannot_run``, the rule every command excludes by), or None."""
        return cannot_run(self.workload, self.gpu) if self.gpu is not None else None

    @property
    def fits(self) -> bool | None:
        """None without a GPU; else the one fit rule (``estimate_fit``: memory only) at the default headroom, as
        ``estimate --json``'s ``fits``."""
        fit = estimate_fit(self)
        return fit.fits if fit is not None else None

    @property
    def runs(self) -> bool | None:
        """None without a GPU; else whether the job runs there: it can (``cannot_run`` None) and it fits."""
        return None if self.fits is None else self.fits and self.cannot_run is None

    def to_dict(self) -> dict:
        """Plain JSON types, as the other results' ``to_dict``: the job as estimated, the GPU's canonical id
        (None: memory only), ``count``, ``memory`` and ``time`` (None without a GPU or ``with_time=False``) in
        their own ``to_dict`` form, ``fits`` at the default headroom and ``runs`` (None without a GPU), and
        ``cannot_run``."""
        return {
            "workload": self.workload.to_dict(),
            "gpu": self.gpu.id if self.gpu is not None else None,
            "count": self.count,
            "memory": self.memory.to_dict(),
            "time": self.time.to_dict() if self.time is not None else None,
            "inference": self.inference.to_dict() if self.inference is not None else None,
            "fits": self.fits,
            "runs": self.runs,
            "cannot_run": self.cannot_run,
            "calibration": self.calibration,
            "calibration_carried_from": self.calibration_carried_from,
            "cpu_offload_bytes": self.cpu_offload_bytes,
            "spillable_bytes": self.spillable_bytes,
        }


@dataclass(frozen=True)
class EstimateFit:
    """The one fit verdict of an estimate on its GPU, with what follows from the same rule."""

    fits: bool
    summary: str                  # the verdict in words (the answer's ``fit_summary``)
    spare_bytes: int              # memory the rule leaves at the peak (negative: short by that much)
    exclusion: reasons.Exclusion  # why recommend leaves the option out on memory (read where ``fits`` is false)


def estimate_fit(est: Estimate, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION) -> EstimateFit | None:
    """The one fit verdict of an estimate (None without a GPU), its words, spare memory and exclusion. Serving
    with vLLM: its reservation (``gpu_memory_utilization``, not the headroom) holds the weights, a prefill and the
    KV cache of the batch's sequences at their whole context (``plan.llm.VllmCapacity``); anything else: the
    peak nvidia-smi would show within the usable memory (``plan.fit.fits``). estimate (the answer and its
    per-GPU rows), recommend's quotes and the remedies use it."""
    if est.gpu is None:
        return None
    capacity = getattr(est.inference, "vllm", None)
    if capacity is not None:
        inf = est.inference
        context, batch = inf.prompt_tokens + inf.new_tokens, inf.batch_size
        return EstimateFit(
            fits=capacity.holds(context, batch), summary=capacity.wording(context, batch),
            spare_bytes=capacity.spare_bytes(context, batch),
            exclusion=reasons.no_kv_room(capacity.shortfall(context, batch)
                                         or "no room for one sequence's KV cache in vLLM's reservation",
                                         weights_alone=est.memory.weights_bytes > capacity.reserved_bytes))
    peak, usable = est.memory.total_upper_bytes, usable_bytes(est.gpu, headroom_fraction)
    judged = (est.gpu.visible_memory_bytes, headroom_fraction)     # said as every fit line says it (usable_words)
    # the upper side decides (one fit rule); where the estimate's total itself fits, it is a risk, not a certainty
    needs = f"{format_bytes(est.memory.total_bytes)}–{format_bytes(peak)}"
    oom = reasons.out_of_memory(est.workload.batch_size, needs, usable_words(usable, *judged),
                                risk=fit_verdict(est.memory, usable) == "tight",
                                weights_alone=est.memory.weights_bytes > usable)
    return EstimateFit(fits=fits(peak, est.gpu, headroom_fraction), summary=fit_wording(est.memory, usable, *judged),
                       spare_bytes=spare_bytes(peak, est.gpu, headroom_fraction), exclusion=oom)



class WorkloadModel(Protocol):
    workload: Workload
    method: str  # "traced" or "closed-form"
    correction: Correction | None   # the user's calibration applied to every estimate (None: shipped model)

    def estimate(
        self, gpu: GPU | None, *, count: int | None = None, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None, provider: str | None = None,
    ) -> Estimate:
        """``count`` GPUs like ``gpu`` (None: the workload's ``num_gpus``) in ``provider``'s machines (None: the
        GPU's usual machine, no cluster network): the provider's topology sets the links time and memory use. The estimate's
        workload is the job as it runs there (``workload_on``: a default bf16 at fp16 on a GPU without it)."""
        ...

    def count_refusal(self, count: int) -> str | None:
        """Why the job cannot be split over ``count`` GPUs at all (None: it can), whatever the GPU."""
        ...

    @property
    def frames_per_sample(self) -> int:
        """JPEGs a sample decodes as the input pipeline counts them (a video clip's frames; 1 for images)."""
        ...


def _check_gpu(gpu: object) -> None:
    """PlanError unless ``gpu`` is a catalog GPU or None (a name, say, before anything is estimated)."""
    if (why := not_a_gpu(gpu, optional=True)) is not None:
        raise PlanError(why)


def _topology(gpu: GPU | None, provider: str | None) -> Topology | None:
    """Where the GPUs are, resolved once per estimate: the one topology its memory and time use."""
    return topology_for(gpu, provider) if gpu is not None else None


class TracedModel:
    """Traces the real model on fake tensors, once per batch size, and reuses the trace. A decoder generating
    (``--max-new-tokens``) adds its KV cache and decode steps to the traced forward (``plan.generation``);
    what that does not model is refused here (PlanError)."""

    method = "traced"

    def __init__(self, workload: Workload, progress: Callable[[str], None] | None = None,
                 correction: Correction | None = None) -> None:
        self._generation = generation_arch(workload) if generates(workload) else None
        if workload.offload != "none":
            logging.getLogger(__name__).warning(
                "--offload %s is modelled for decoder LLMs (the closed form) only: the traced estimate keeps "
                "everything on the GPU", workload.offload)
        self.workload = workload
        self.correction = correction
        self._traces: dict[tuple[str, int, int], Trace] = {}
        self._progress = progress or (lambda _msg: None)

    def trace(self, batch_size: int | None = None, grad_accum_steps: int | None = None,
              precision: str | None = None) -> Trace:
        """The trace at this micro-batch (and ``precision``, the workload's where None). Accumulation
        matters to memory only as "1 or more": from the second micro-batch on, the previous gradients
        stay allocated; 2 stands for every count above 1."""
        b = batch_size or self.workload.batch_size
        accum = grad_accum_steps or self.workload.grad_accum_steps
        key = (precision or self.workload.precision, b, min(accum, 2))
        if key not in self._traces:
            self._progress(f"tracing {self.workload.model} at batch {b}")
            self._traces[key] = trace_workload(self.workload.with_(
                precision=key[0], batch_size=b, grad_accum_steps=key[2], num_gpus=1))
        return self._traces[key]

    @property
    def frames_per_sample(self) -> int:
        """A video clip's frames (``Trace.frames_per_sample``, the same at every batch: read from any trace made;
        no trace is made for it), 1 for images and where no --cpu-workers decode JPEGs (the only reader)."""
        traces = list(self._traces.values())
        return traces[0].frames_per_sample if traces and self.workload.cpu_workers else 1

    def count_refusal(self, count: int) -> str | None:
        return None     # data parallelism: any count (the batch split is recommend's rule)

    def estimate(
        self, gpu: GPU | None, *, count: int | None = None, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None, provider: str | None = None,
    ) -> Estimate:
        _check_gpu(gpu)
        count = self.workload.num_gpus if count is None else count
        job = workload_on(self.workload, gpu)
        job = job.with_(batch_size=batch_size or job.batch_size, num_gpus=count,
                        grad_accum_steps=grad_accum_steps or job.grad_accum_steps)
        topo = _topology(gpu, provider)
        trace = self.trace(job.batch_size, job.grad_accum_steps, job.precision)
        memory = _data_parallel(estimate_memory(trace, gpu), trace, topo, count)
        # the step's accumulation (and stack) are the job's: the trace holds one micro-step
        step = (predict_step_time(trace, gpu, count=count, topology=topo, workload=job)
                if with_time and gpu is not None else None)
        inference = None
        if self._generation is not None:    # the forward is the prefill: HF generate's KV cache and decode steps
            memory, step, inference = traced_generation(self._generation, job, memory, step, gpu)
        # the job recorded has the sizes a factory's guessed inputs had (the trace knows them)
        return _corrected(Estimate(trace.sized_job(job), gpu, count, memory, step, inference), self.correction)


def _data_parallel(memory, trace: Trace, topology: Topology | None, count: int):
    """The traced single-GPU peak plus what ``count``-way data parallelism adds (buckets, NCCL buffers,
    ZeRO/FSDP gathers) and removes (the shards it does not hold of what the peak and the whole step hold):
    ``gpuwise.memory.parallel``. ``topology``: how the GPUs are linked (None: no GPU named, a PCIe box)."""
    wl = trace.workload
    if count <= 1 or not wl.is_training or trace.trainable_param_count == 0:
        return memory

    grad_bytes = trace.trainable_param_count * trainable_bytes(wl.precision)   # all of them: buckets, partitions
    at_peak = ModelState(memory.weights_bytes, memory.gradients_bytes, memory.optimizer_bytes)
    link, multi_node = ring_of(topology, count)
    parallel = data_parallel_memory(
        sharding=wl.sharding, count=count, weights_bytes=memory.weights_bytes, gradients_bytes=grad_bytes,
        optimizer_bytes=memory.optimizer_bytes, layers=DEFAULT_LAYERS, link_kind=link, multi_node=multi_node,
        held=held_throughout(trace.events, at_peak),
    )
    return with_data_parallel(memory, parallel, count, wl.sharding)


class ClosedFormLlmModel:
    """Decoder LLMs: architecture arithmetic, no trace (seconds for 70B+ models and sweeps)."""

    method = "closed-form"

    def __init__(self, workload: Workload, correction: Correction | None = None) -> None:
        self.workload = workload
        self.correction = correction

    frames_per_sample = 1       # no images: the input pipeline is not costed

    def count_refusal(self, count: int) -> str | None:
        """Serving on ``count`` GPUs shards the model by tensor parallelism: only where the heads split; HF
        generate splits it by layers (``splits_layers``): any count up to the layers. Either within one machine,
        which ``estimate`` checks where the GPU and so its machine are known (``serving_nodes_refusal``)."""
        if self.workload.is_training or count <= 1:
            return None
        arch = load_arch(self.workload.model)
        if splits_layers(self.workload.with_(num_gpus=count)):
            return (None if count <= arch.num_layers else
                    f"HF generate splits the {arch.num_layers} layers over the GPUs: not over {count}")
        return arch.tensor_parallel_refusal(count)

    def estimate(
        self, gpu: GPU | None, *, count: int | None = None, batch_size: int | None = None, with_time: bool = True,
        grad_accum_steps: int | None = None, provider: str | None = None,
    ) -> Estimate:
        _check_gpu(gpu)
        count = self.workload.num_gpus if count is None else count
        job = workload_on(self.workload, gpu)
        w = job.with_(batch_size=batch_size or job.batch_size, num_gpus=count,
                      grad_accum_steps=grad_accum_steps or job.grad_accum_steps)
        topology = _topology(gpu, provider)
        # one replica over several machines: refused as recommend leaves it out (the one rule, its words)
        if topology is not None and (why := serving_nodes_refusal(w, count, topology)):
            raise PlanError(why)
        result = estimate_llm(w, gpu, topology=topology)
        # the job as estimated: at a request rate, the batch one replica runs (gpuwise.plan.llm)
        return _corrected(Estimate(result.workload, gpu, count, result.memory, result.time,
                                   getattr(result, "inference", None), cpu_offload_bytes=result.cpu_offload_bytes,
                                   spillable_bytes=result.spillable_bytes), self.correction)


def layer_split_nodes_refusal(count: int, topology: Topology) -> str:
    """HF generate's layer split (``splits_layers``) over more GPUs than one machine of ``topology`` has, refused:
    accelerate's ``device_map="auto"`` places the layers on the GPUs of the one process's machine."""
    return (f"{count} GPUs: HF generate (device_map=\"auto\") splits the layers over the GPUs of one machine, "
            f"and {topology.gpu_id} machines have {topology.gpus_per_node}: serve on at most "
            f"{topology.gpus_per_node}, or with --engine vllm")


def serving_nodes_refusal(workload: Workload, count: int, topology: Topology) -> str | None:
    """Why one replica of a server cannot be quoted on ``count`` GPUs that span machines (None: one machine, or
    not a server): HF's layer split is one process on one machine (``layer_split_nodes_refusal``), and vLLM across
    machines runs tensor parallel inside each and pipeline parallel between them over a Ray cluster, which neither
    its timing here (tensor parallel over all ``count``) nor its ``vllm serve`` line is: more replicas of one
    machine each serve more requests instead."""
    if workload.mode != "infer" or topology.nodes(count) <= 1:
        return None
    if splits_layers(workload.with_(num_gpus=count)):
        return layer_split_nodes_refusal(count, topology)
    return (f"{count} GPUs: one vLLM replica over {topology.nodes(count)} machines runs pipeline parallel across them "
            f"on a Ray cluster, which gpuwise neither times nor launches: serve on at most "
            f"{topology.gpus_per_node} per replica (more replicas for more requests)")


def model_for(workload: Workload, progress: Callable[[str], None] | None = None, *,
              correction: Correction | None = None) -> WorkloadModel:
    """The closed form for decoder LLMs (any size), the trace for everything else. ``correction``: the
    user's calibration (``gpuwise.calibrate.apply.correction``) applied to its every estimate; None: the
    shipped model. A request rate (``--request-rate``) is a load on a decoder LLM the closed form serves: on a
    traced model it is refused (PlanError), as the latency targets are."""
    if is_llm(workload):
        return ClosedFormLlmModel(workload, correction)
    if workload.request_rate_per_s is not None:
        raise PlanError(request_rate_refusal(workload.model))
    return TracedModel(workload, progress, correction)


def largest_fitting_batch(
    model: WorkloadModel, gpu: GPU, *, count: int = 1, headroom_fraction: float = DEFAULT_HEADROOM_FRACTION,
    limit: int = MAX_AUTO_BATCH, powers_of_two: bool | None = None, provider: str | None = None,
) -> int:
    """The largest micro-batch that fits ``count`` of ``gpu`` at ``provider`` (0 when batch 1 does not),
    by the one search of ``gpuwise.plan.fit``. Traced models search powers of two by default (each new batch is a trace;
    the grid is shared by every GPU of a recommendation); the closed form searches every integer. Searching every
    integer, the answer is the largest batch b with every batch up to b fitting (``largest_fitting``'s ``below``:
    the ``CHECKED_BELOW`` batches under b are checked too, as memory steps back a little between neighbouring
    batches), not a larger one that fits again past some that do not. Serving with vLLM: the sequences its KV
    cache holds at the whole context, up to max_num_seqs (``plan.llm.VllmCapacity``)."""
    if powers_of_two is None:
        powers_of_two = model.method == "traced"
    served = model.workload
    if model.method == "closed-form" and not served.is_training and served.engine == "vllm":
        # vLLM: what its reservation holds (VllmCapacity), not the headroom rule
        first = model.estimate(gpu, count=count, batch_size=1, with_time=False, provider=provider)
        return min(limit, first.inference.max_batch_size or 0)

    def total_bytes(batch: int) -> int:
        return model.estimate(gpu, count=count, batch_size=batch, with_time=False,
                              provider=provider).memory.total_upper_bytes

    return largest_fitting(total_bytes, usable_bytes(gpu, headroom_fraction), upper=limit, powers_of_two=powers_of_two,
                           below=0 if powers_of_two else CHECKED_BELOW)


def divisors_of(n: int) -> list[int]:
    """The divisors of ``n`` ascending (the micro-batches that split an effective batch evenly)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def largest_divisor_at_most(n: int, limit: int) -> int:
    """The largest micro-batch that splits ``n`` samples evenly and is at most ``limit`` (1 at least)."""
    return max(d for d in divisors_of(n) if d <= max(limit, 1))


def fitting_micro_batch(
    model: WorkloadModel, gpu: GPU, per_gpu: int, *, start: int | None = None, count: int = 1,
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION, provider: str | None = None,
) -> int:
    """How a training option runs ``per_gpu`` samples per GPU per optimizer step: the largest micro-batch
    that divides it, at most ``start`` (None: all of it in one micro-batch), that fits by the one rule
    (the upper side of its estimate within the usable memory: ``estimate_fit``) **at the accumulation it
    runs**, ``per_gpu // micro`` steps (from two on, the gradients stay allocated between micro-batches:
    a micro-batch that fits alone may not fit accumulating). 0 when batch 1 does not fit. ``recommend
    --batch-size auto`` starts from the whole per-GPU batch, an explicit ``--batch-size`` that does not fit
    from itself; every candidate is estimated at exactly the split it would run, so the answer fits (a
    search that assumes memory grows with the micro-batch may, where it does not, miss a larger divisor)."""
    divisors = [d for d in divisors_of(per_gpu) if d <= (start or per_gpu)]
    usable = usable_bytes(gpu, headroom_fraction)

    def total_bytes(micro: int) -> int:
        return model.estimate(gpu, count=count, batch_size=micro, grad_accum_steps=per_gpu // micro,
                              with_time=False, provider=provider).memory.total_upper_bytes

    if total_bytes(divisors[-1]) <= usable:      # as asked (or the whole batch at once): one estimate
        return divisors[-1]
    return largest_fitting(total_bytes, usable, grid=divisors[:-1]) if len(divisors) > 1 else 0


def cannot_run(workload: Workload, gpu: GPU) -> str | None:
    """Why ``workload`` cannot run on ``gpu`` (None: it can): bf16 needs bf16 support (Ampere and newer;
    PyTorch refuses bf16 autocast on a T4 or V100), unless the precision was the default rule's, which
    runs at its fp16 twin there; weights a GPU cannot run; several GPUs of a MIG slice (``mig_count_refusal``). The
    one rule estimate, recommend and the time scaling of report and advise apply."""
    scheme = served_scheme(workload.model, workload.quant) if workload.quant in WEIGHT_ONLY_QUANTS else None
    return (why_not_on(workload_on(workload, gpu).precision, gpu.has_bf16, gpu.arch)
            or quant_refusal(workload.quant, gpu, workload.engine, scheme)
            or mig_count_refusal(gpu, workload.num_gpus))


def step_time_function(workload: Workload, progress: Callable[[str], None] | None = None, *,
                       correction: Correction | None = None):
    """GPU -> predicted step time (s) of ``workload`` on ``workload.num_gpus`` of that GPU, or None
    where it cannot run there (amp-bf16 without bf16). One trace (or none, for LLMs), cached per GPU:
    the right-sizing report and the advice use it when the job's workload is known."""
    model = model_for(workload, progress, correction=correction)
    cache: dict[str, float | None] = {}

    def step_time_s(gpu: GPU) -> float | None:
        if gpu.id not in cache:
            try:
                est = None if cannot_run(workload, gpu) else model.estimate(gpu, count=workload.num_gpus)
            except PlanError:   # the job cannot be laid out there (a vLLM replica over that GPU's machines)
                est = None
            cache[gpu.id] = est.time.step_time_s if est is not None and est.time is not None else None
        return cache[gpu.id]

    return step_time_s
