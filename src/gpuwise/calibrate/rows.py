"""A measurement made ready for the fit: checked (workload, step times, a known GPU, a step time between what the
GPU can reach and what a step of the job plausibly takes) and set beside the shipped model's prediction for the
same workload on the same GPU."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.evidence import job_key
from gpuwise.calibrate.export import PRIVATE_ROW_NOTE, RowMeasurement
from gpuwise.calibrate.own_memory import own_process_memory_bytes
from gpuwise.calibrate.step import MEMORY_FIGURES, FitRow, class_key
from gpuwise.catalog import GPU, Catalog, CatalogError, missing_gpu_remedy, resolve_gpu
from gpuwise.catalog.resolve import AmbiguousGpuName, UnknownGpuName
from gpuwise.errors import GpuwiseError
from gpuwise.plan.llm import estimate_llm
from gpuwise.plan.profile import WorkloadModel, model_for
from gpuwise.runtime.model import StepTime
from gpuwise.runtime.predict import roofline_step_s
from gpuwise.runtime.rates import peak_flops_per_s
from gpuwise.runtime.stack import Stack
from gpuwise.report.measured import MIN_TIMED_STEPS, PRIVATE_MODEL, WARMUP_STEPS, Measurement
from gpuwise.report.rightsize import rented_gpu, resolve_rented
from gpuwise.workload import Workload

# A measured step under this share of its job's roofline on the GPU is refused (``check_reachable``). Not 1:
# the roofline sums each traced op's bytes at the datasheet bandwidth, and real stacks beat that sum (fused
# kernels, tensors that stay in L2, clocks above the datasheet's boost): of the 200 public runs of
# benchmarks/results/time_cases.csv, 13 measured faster than it, the fastest at 1/1.37 of it (0.73).
ROOFLINE_FLOOR_SHARE = 0.5
# A measured step over this multiple of the shipped prediction (host issue time and any predicted input wait
# included) is refused (``check_reachable``): the GPU would be busy under 1/1000 of the step, so the run measures
# something else (a wrong unit, another job, a stalled loader) and the fit could only follow it with a host term
# that every estimate on that GPU then pays. Generous for host- and input-bound jobs: the slowest runs of the docs
# and tests are 16x their prediction (a 9.9 ms guarded fp32 MLP predicted at 0.63 ms), and the fit's own reach on
# the GPU's side is MAX_FACTOR (50x).
PREDICTION_CEILING_FACTOR = 1000.0
# The predicted step outside its classes (communication, input wait) is the step time less the classes' sum: a
# step with none leaves float rounding (3.5e-18 s once, stored as such). Under this share of the step it is 0.
OTHER_TOLERANCE = 1e-9


def outside_classes_s(step_time_s: float, classes_s: float) -> float:
    """The step time outside its classes: 0 where the difference is rounding (under ``OTHER_TOLERANCE``)."""
    other = step_time_s - classes_s
    return other if other > OTHER_TOLERANCE * abs(step_time_s) else 0.0


def predicted_classes(time: StepTime, precision, gpu: GPU) -> tuple[dict[str, float], float]:
    """A shipped step as the fit sees it: (seconds per ``class_key`` on ``gpu``, seconds outside the classes)."""
    by_class = {class_key(c, precision, gpu): float(s) for c, s in time.by_class_s.items()}
    return by_class, outside_classes_s(float(time.step_time_s), sum(by_class.values()))


def own_peak_bytes(m: Measurement) -> int | None:
    """The most memory ``m`` measured that was its job's own (``FitRow.measured_peak_bytes``): the larger of its
    process memory where NVML matched the job's pids (``own_memory``: one that counted every process on the GPU may
    hold a co-tenant's) and PyTorch's peak reserved (the job's allocator's alone); None when it measured neither."""
    figures = [b for b in (own_process_memory_bytes(m), m.peak_reserved_bytes) if b is not None]
    return int(max(figures)) if figures else None


def measured_gpu(m: Measurement, catalog: Catalog) -> GPU:
    """The catalog GPU the run measured; CalibrateError when the run names none or an unknown one. An exported
    row names it by catalog id (``gpu``, authoritative) and driver name (``gpu_name``): an unknown id is refused
    whatever the name says, and so is a name that is another catalog GPU than the id."""
    gpu_id = m.gpu_id if isinstance(m, RowMeasurement) else None
    if gpu_id is not None:
        try:
            gpu = resolve_gpu(catalog, gpu_id)
        except CatalogError as exc:
            raise CalibrateError(f"{m.source}: gpu: {exc}") from None
        named, _ = resolve_rented(catalog, m.gpu_name) if m.gpu_name else (None, None)
        if named is not None and named.id != gpu.id:
            raise CalibrateError(f"{m.source}: the row's gpu is {gpu.id} but its gpu_name {m.gpu_name!r} is "
                                 f"{named.id}: fix the row (gpu, the catalog id, is what it calibrates)")
        return gpu
    if not m.gpu_name:
        raise CalibrateError(f"{m.source}: the run names no GPU (no GPU samples, no torch record): "
                             "nothing to calibrate")
    try:
        gpu, _note = rented_gpu(catalog, m.gpu_name)
    except AmbiguousGpuName as exc:
        raise CalibrateError(f"{m.source}: {exc}") from None
    except UnknownGpuName as exc:
        if exc.resembles:       # a near miss: the known names it resembles
            raise CalibrateError(f"{m.source}: {exc}; or, if it is a GPU the catalog lacks, "
                                 f"{missing_gpu_remedy(m.gpu_name)}") from None
        raise CalibrateError(f"{m.source}: its GPU, {m.gpu_name!r}, is not in the catalog: "
                             f"{missing_gpu_remedy(m.gpu_name)}") from None
    except CatalogError as exc:     # a known GPU with a bad MIG profile, say
        raise CalibrateError(f"{m.source}: {exc}") from None
    return gpu


def roofline_s(model: WorkloadModel, job: Workload, gpu: GPU) -> float | None:
    """The plain roofline of one step of ``job`` on one ``gpu``: per traced op, the larger of its FLOPs at the
    datasheet peak of the rate it runs at and its bytes at the datasheet bandwidth (``OpFeatures.roofline_s``,
    the time model's own figure), summed over the micro-steps and the optimizer. Under torch.compile only the
    matmul, convolution and attention ops count (their FLOPs stay; fusion removes the others' bytes). The
    closed form (no trace): its FLOPs at the precision's peak. None when the job is split over GPUs by
    tensor parallelism (closed form on more than one GPU)."""
    if model.method != "traced":
        if job.num_gpus > 1:
            return None
        return estimate_llm(job, gpu).flops_per_step / peak_flops_per_s(gpu, job.precision)
    trace = model.trace(job.batch_size, job.grad_accum_steps, job.precision)
    sharded = job.num_gpus > 1 and job.sharding != "ddp"     # each rank updates its shard (runtime.predict)
    return roofline_step_s(trace, gpu, stack=Stack.from_workload(job),
                           accum_steps=job.grad_accum_steps if job.is_training else 1,
                           optimizer_shards=job.num_gpus if sharded else 1)


def check_reachable(m: Measurement, model: WorkloadModel, job: Workload, gpu: GPU, predicted_step_s: float) -> None:
    """CalibrateError (one line) when ``m`` measured a step no run of that job on ``gpu`` takes: under
    ``ROOFLINE_FLOOR_SHARE`` of its job's roofline (no GPU is that fast: the fit would scale every class it carried
    by its floor to follow it), or over ``PREDICTION_CEILING_FACTOR`` × ``predicted_step_s``, the shipped
    prediction with its host time (the GPU idle nearly all the step: the fit would follow it with a host term
    every other estimate on that GPU pays)."""
    if m.step_time_s is None:
        return
    ceiling_s = PREDICTION_CEILING_FACTOR * predicted_step_s
    if predicted_step_s > 0 and m.step_time_s > ceiling_s:
        raise CalibrateError(
            f"{m.source}: measured step time {m.step_time_s:.3g} s is over the ceiling of {ceiling_s:.3g} s for its "
            f"workload on {gpu.id} ({PREDICTION_CEILING_FACTOR:g}x the shipped prediction of {predicted_step_s:.3g} s, "
            "host time included: the GPU would be busy under 0.1% of the step): not a step of this job on this GPU "
            "(a wrong unit, another job, a stalled loader)")
    roof_s = roofline_s(model, job, gpu)
    if roof_s is None:
        return
    floor_s = ROOFLINE_FLOOR_SHARE * roof_s
    if m.step_time_s < floor_s:
        raise CalibrateError(
            f"{m.source}: measured step time {m.step_time_s:.3g} s is under the floor of {floor_s:.3g} s for its "
            f"workload on {gpu.id} ({ROOFLINE_FLOOR_SHARE:.0%} of its roofline: FLOPs at the datasheet peak, bytes "
            "at the datasheet bandwidth): not a step of this job on this GPU")


def check_usable(m: Measurement) -> None:
    """CalibrateError (one line) when the run cannot calibrate: no workload, an exported row's private model, no
    step times."""
    if m.workload is None:
        raise CalibrateError(f"{m.source}: the run records no workload (run it under `gpuwise run --model SPEC …` "
                             "or give the guard workload=…)")
    if isinstance(m, RowMeasurement) and m.workload.get("model") == PRIVATE_MODEL:
        raise CalibrateError(f"{m.source}: the row's model is \"{PRIVATE_MODEL}\": {PRIVATE_ROW_NOTE}")
    if m.step_time_s is None:
        raise CalibrateError(f"{m.source}: the run records no step times after warm-up ({m.timed_steps} timed; "
                             f"the guard times each step, {WARMUP_STEPS} warm-up + at least {MIN_TIMED_STEPS})")


def fingerprint(m: Measurement, gpu_id: str) -> str:
    """The same measurement read twice (the same log given again) counts once."""
    keys = ("workload", "step_time_s", "timed_steps", "peak_allocated_bytes", "peak_reserved_bytes",
            "process_memory_bytes", "driver_version", "cuda_version", "torch_version")
    doc = {"gpu": gpu_id, **{k: getattr(m, k) for k in keys}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def fit_row(m: Measurement, gpu: GPU, progress: Callable[[str], None] | None = None) -> FitRow:
    """The shipped model's prediction (never an earlier calibration) beside what ``m`` measured."""
    check_usable(m)
    try:
        workload = Workload.from_dict(m.workload)
        model = model_for(workload, progress)
        est = model.estimate(gpu, count=workload.num_gpus)   # no correction: shipped
    except (GpuwiseError, TypeError, ValueError) as exc:
        raise CalibrateError(f"{m.source}: no prediction for its workload: {str(exc)[:200]}") from None
    if est.time is None:
        raise CalibrateError(f"{m.source}: gpuwise predicts no step time for this workload on {gpu.id}")
    check_reachable(m, model, est.workload, gpu, float(est.time.step_time_s))
    by_class, other_s = predicted_classes(est.time, workload.precision, gpu)
    measured_outside = (m.process_memory_bytes - m.peak_reserved_bytes
                        if m.process_memory_bytes is not None and m.peak_reserved_bytes is not None else None)
    return FitRow(
        fingerprint=fingerprint(m, gpu.id), predicted_by_class_s=by_class,
        predicted_other_s=other_s,
        measured_step_time_s=float(m.step_time_s),
        predicted_outside_allocator_bytes=est.memory.total_bytes - est.memory.peak_reserved_bytes,
        measured_outside_allocator_bytes=measured_outside,
        stack={k: str(v) for k, v in m.stack.items() if v},
        predicted_host_s=float(est.time.host_s),
        unmeasured_memory=tuple(k for k in MEMORY_FIGURES if getattr(m, k) is None),
        measured_peak_bytes=own_peak_bytes(m), job_key=job_key(est.workload),
    )
