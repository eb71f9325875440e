"""A measurement made ready for the fit: checked (workload, step times, a known GPU) and set beside the
shipped model's prediction for the same workload on the same GPU."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.fit import FitRow, class_key
from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import GpuwiseError
from gpuwise.plan.profile import model_for
from gpuwise.report.measured import MIN_TIMED_STEPS, WARMUP_STEPS, Measurement, workload_of
from gpuwise.report.rightsize import resolve_rented


def measured_gpu(m: Measurement, catalog: Catalog) -> GPU:
    """The catalog GPU the run measured; CalibrateError when the run names none or an unknown one."""
    if not m.gpu_name:
        raise CalibrateError(f"{m.source}: the run names no GPU (no GPU samples, no torch record): nothing to calibrate")
    gpu, note = resolve_rented(catalog, m.gpu_name)
    if gpu is None:
        raise CalibrateError(f"{m.source}: {note.split(': pass')[0]}")
    return gpu


def check_usable(m: Measurement) -> None:
    """CalibrateError (one line) when the run cannot calibrate: no workload, no step times."""
    if m.workload is None:
        raise CalibrateError(f"{m.source}: the run records no workload (run it under `gpuwise run --model SPEC …` "
                             "or give the guard workload=…)")
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
        workload = workload_of(m.workload)
        est = model_for(workload, progress).estimate(gpu, count=workload.num_gpus)   # no correction: shipped
    except (GpuwiseError, TypeError, ValueError) as exc:
        raise CalibrateError(f"{m.source}: no prediction for its workload: {str(exc)[:200]}") from None
    if est.time is None:
        raise CalibrateError(f"{m.source}: gpuwise predicts no step time for this workload on {gpu.id}")
    by_class = {class_key(c, workload.precision, gpu): float(s) for c, s in est.time.by_class_s.items()}
    measured_outside = (m.process_memory_bytes - m.peak_reserved_bytes
                        if m.process_memory_bytes is not None and m.peak_reserved_bytes is not None else None)
    return FitRow(
        fingerprint=fingerprint(m, gpu.id), predicted_by_class_s=by_class,
        predicted_other_s=max(0.0, est.time.step_time_s - sum(by_class.values())),
        measured_step_time_s=float(m.step_time_s),
        predicted_outside_allocator_bytes=est.memory.total_bytes - est.memory.peak_reserved_bytes,
        measured_outside_allocator_bytes=measured_outside,
        stack={k: str(v) for k, v in m.stack.items() if v},
        predicted_host_s=float(est.time.host_s),
    )
