"""The fit: what measured runs on one GPU say about the shipped time and memory model there.

Time. For run *i* the shipped model predicts seconds per operator class ``p_ic`` (``StepTime.by_class_s``;
a class is keyed by the peak its kernels run at on that GPU, ``conv/fp16`` apart from ``conv/fp32``:
tensor-core and CUDA-core kernels miss the datasheet by different amounts), the host's time to issue the
step's kernels ``H_i`` (``StepTime.host_s``), and ``o_i`` seconds outside the classes (communication, input
wait); the run measured ``T_i``. The calibrated step composes host and device the way the step model does
(``runtime.predict.predict_step_time``: eager PyTorch issues kernels into a queue the GPU drains, so a step
takes about the larger of the two, a smooth maximum):

    T_i ≈ B_i · (1 + e_i) + [smooth_max(D_i, f_launch · H_i + h) − B_i] + f_offload · O_i + o_i,
    D_i = Σ_c f_c · p_ic,  B_i = smooth_max(D_i, f_launch · H_i)

with one factor ``f_c = g · exp(δ_c)`` per device class, a factor ``f_launch`` on the host's issue time
and a host term ``h`` ≥ 0 (seconds per step on the host the GPU model does not see: data loading, Python,
logging). ``e_i`` is the shipped step's own relative excess over one smooth maximum (it takes one per
phase: micro-steps and optimizer), so factors of 1 and ``h`` = 0 give the shipped prediction exactly; the
bracket is what ``h`` adds (the "host" class ``compose`` reports). A GPU-bound step hides the host side
behind its kernels: ``h`` moves it only where the host sets the pace. ``O_i`` is an offloaded LLM step's
offload part (``runtime.llm.OFFLOAD_CLASS``: the CPU's optimizer step and the PCIe copies, after the
micro-batches): neither the GPU's work nor beside it, so it sits outside the smooth maximum under a factor
of its own, ``f_offload``, with the weakest prior (the CPU optimizer's rate is the closed form's assumption of
the host's CPU, far less certain than the GPU's kernels: a slow CPU Adam is its, never the GPU classes'). The fit minimises the relative
residuals plus priors, each on the relative change of its side of the smooth maximum: ``ln g`` and
``ln(1 + h / median H)`` weakly (so a run is explained by the side that needs the smaller change: a
GPU-bound run by slower kernels, a host-bound one by host time; and one run lands within 1 % of its
measurement however far the shipped model was from it); ``ln f_launch`` weakly below 0 and firmly above
(a slow host side is the host term's, which GPU-bound jobs hide; a factor would scale every other job's
issue time); the class deviations ``δ_c`` firmly (they need runs that tell the classes apart). So one run
scales every device class it exercised alike, or, when the host set its pace, adds host time; varied runs
separate them. Never by model name.

Evidence. A factor applies only to a class the runs give evidence for (``evidence.fitted_classes``, what both the
fit and a reloaded file keep: ``evidence``'s module docstring says which and why); every other class keeps the
shipped model (factor 1).

Memory. What the caching allocator does not hold (CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers)
depends on the stack: the offset is the median, over runs that measured both, of (NVML process memory −
torch max reserved) − (predicted total − predicted reserved); None ("not measured", never applied) when no run
measured both.

The pieces the fit stands on have homes of their own, whose public names this module also gives: the run and the
composition (``step``: ``FitRow``, ``class_key``, ``compose``), the evidence (``evidence``), and the calibration
it returns (``calibration``: ``GpuCalibration``, its bounds and words).
"""

from __future__ import annotations

import datetime as _dt
import logging
import statistics
from collections.abc import Mapping, Sequence

from gpuwise.calibrate.calibration import (
    BOUND_TOLERANCE,
    MAX_FACTOR,
    MIN_FACTOR,
    SHOWN_HOST_S,
    UNREPRODUCED_RATIO,
    GpuCalibration,
    duration_text,
    error_text,
    mixed_stacks_text,
)
from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.evidence import (
    MIN_CLASS_SHARE,
    SAME_WORKLOAD_TOLERANCE,
    faster_than_host_side,
    fitted_classes,
    same_workload,
    same_workload_disagreements,
    supported_classes,
)
from gpuwise.calibrate.step import (
    HOST,
    LAUNCH,
    MEMORY_FIGURES,
    OFFLOAD,
    SMOOTH_MAX_P,
    UNKEYED,
    CalibratedStep,
    FitRow,
    ShippedSides,
    class_key,
    compose,
    implied_host_s,
    on_device,
    shipped_sides,
    smooth_max,
)

# the names of the fit's parts, given here too (other modules, benchmarks/ and tests import them from fit)
__all__ = [
    "BOUND_TOLERANCE", "CLASS_PRIOR_WEIGHT", "GLOBAL_PRIOR_WEIGHT", "HOST", "HOST_FACTOR_PRIOR_WEIGHT",
    "HOST_PRIOR_WEIGHT", "LAUNCH", "MAX_FACTOR", "MEMORY_FIGURES", "MIN_CLASS_SHARE", "MIN_FACTOR", "OFFLOAD",
    "OFFLOAD_PRIOR_WEIGHT", "SAME_WORKLOAD_TOLERANCE", "SHOWN_HOST_S", "SMOOTH_MAX_P", "UNKEYED", "UNREPRODUCED_RATIO",
    "CalibratedStep", "FitRow", "GpuCalibration", "ShippedSides", "class_key", "compose", "duration_text",
    "error_text", "faster_than_host_side", "fit_gpu", "fit_memory_offset", "fit_time", "fitted_classes",
    "implied_host_s", "on_device", "same_workload", "same_workload_disagreements", "shipped_sides", "smooth_max",
    "supported_classes",
]

GLOBAL_PRIOR_WEIGHT = 1e-3     # (ln g)²: a whisper, so one run is followed to within ~0.5 % at any scale
CLASS_PRIOR_WEIGHT = 1e-2      # δ_c²: a class ×1.5 apart from the others costs as much as a 4 % residual
# (ln f_launch)²: weak below 1 (a faster host than the priors: harmless elsewhere); firm above 1, where the
# host term explains a slow host side instead (a factor would scale every other job's issue time with it)
HOST_FACTOR_PRIOR_WEIGHT = {"down": 1e-3, "up": 1e-2}
HOST_PRIOR_WEIGHT = 1e-3       # ln(1 + h / median issue time)²: as weak as g's, on the host's side
# (ln f_offload)²: weaker than g's, so an offloaded run's gap is the CPU part's, not the GPU classes' (fit docstring)
OFFLOAD_PRIOR_WEIGHT = 1e-4


def fit_time(rows: Sequence[FitRow]) -> tuple[float, dict[str, float], float]:
    """(global factor g, per-class factors, host seconds per step) by bounded nonlinear least squares on the
    composition of ``compose`` (module docstring). Only classes with evidence (``fitted_classes``) are
    fitted; the others are held at 1 (their seconds count as predicted), so one run still lands on its
    measurement through the classes that carried it. Which factors it fits, ``launch``'s and ``offload``'s among
    them, is ``fitted_classes``'s answer."""
    kept = fitted_classes(rows)
    classes = sorted(c for c in kept if on_device(c))
    fit_launch, fit_offload = LAUNCH in kept, OFFLOAD in kept
    if not rows or not kept:
        raise CalibrateError("no run with a predicted step time to calibrate on")
    import numpy as np                       # imported here: loading a calibration needs neither
    from scipy.optimize import least_squares

    n, n_cls = len(rows), len(classes)
    fitted = np.array([[r.predicted_by_class_s.get(c, 0.0) for c in classes] for r in rows]).reshape(n, n_cls)
    held = np.array([sum(s for c, s in r.predicted_by_class_s.items() if on_device(c) and c not in classes)
                     for r in rows])
    sides = [shipped_sides(r) for r in rows]
    d0 = np.array([s.device_s for s in sides])
    w0 = np.array([r.predicted_by_class_s.get(LAUNCH, 0.0) for r in rows])
    h0 = np.array([s.issue_s for s in sides])
    excess = np.array([s.excess for s in sides])
    other = np.array([r.predicted_other_s for r in rows])
    offload = np.array([r.predicted_by_class_s.get(OFFLOAD, 0.0) for r in rows])   # in series: the CPU's part
    measured = np.array([r.measured_step_time_s for r in rows])
    # The host term's unit: the runs' issue time (median), so its prior, like g's, is on the relative change
    # of its side of the smooth maximum: a run is explained by the side that needs the smaller change.
    host_unit_s = float(np.median(h0[h0 > 0])) if np.any(h0 > 0) else float(np.median(measured))
    log_bound = float(np.log(MAX_FACTOR / MIN_FACTOR))
    i_launch = 1 + n_cls
    i_offload = i_launch + int(fit_launch)
    i_host = i_offload + int(fit_offload)

    def unpack(x):
        g = float(np.exp(x[0]))
        f_launch = float(np.exp(x[i_launch])) if fit_launch else 1.0
        f_offload = float(np.exp(x[i_offload])) if fit_offload else 1.0
        return g, g * np.exp(x[1:1 + n_cls]), f_launch, f_offload, host_unit_s * float(np.expm1(x[i_host]))

    def residuals(x):
        _g, f, f_launch, f_offload, h = unpack(x)
        device = fitted @ f + held
        base = smooth_max(device, f_launch * h0)
        predicted = (np.maximum(base * (1 + excess), device) + smooth_max(device, f_launch * h0 + h) - base + other
                     + f_offload * offload)
        priors = [GLOBAL_PRIOR_WEIGHT ** 0.5 * x[0], *(CLASS_PRIOR_WEIGHT ** 0.5 * x[1:1 + n_cls])]
        if fit_launch:
            priors.append(HOST_FACTOR_PRIOR_WEIGHT["up" if x[i_launch] > 0 else "down"] ** 0.5 * x[i_launch])
        if fit_offload:
            priors.append(OFFLOAD_PRIOR_WEIGHT ** 0.5 * x[i_offload])
        priors.append(HOST_PRIOR_WEIGHT ** 0.5 * x[i_host])
        return np.concatenate([(predicted - measured) / measured, priors])

    factors_n = int(fit_launch) + int(fit_offload)          # launch's and offload's: a factor each
    lower = [np.log(MIN_FACTOR)] + [-log_bound] * n_cls + [np.log(MIN_FACTOR)] * factors_n + [0.0]
    upper = [np.log(MAX_FACTOR)] + [log_bound] * n_cls + [np.log(MAX_FACTOR)] * factors_n + [20.0]
    shipped = (d0 + w0) + other + offload
    # Starts: the shipped model; every run's gap read as slower kernels; read as host time. The smooth
    # maximum makes the problem non-convex, so the best of the three is kept.
    gap_s = float(np.median(np.maximum(measured - shipped, 0.0)))
    starts = []
    for ln_g, v in ((0.0, 0.0), (float(np.log(np.median(measured / shipped))), 0.0),
                    (0.0, float(np.log1p(gap_s / host_unit_s)))):
        x0 = np.zeros(len(lower))
        x0[0], x0[i_host] = min(max(ln_g, lower[0]), upper[0]), min(v, upper[-1])
        starts.append(least_squares(residuals, x0, bounds=(lower, upper)))
    g, f, f_launch, f_offload, h = unpack(min(starts, key=lambda r: r.cost).x)
    factors = {c: float(min(max(v, MIN_FACTOR), MAX_FACTOR)) for c, v in zip(classes, f)}
    if fit_launch:
        factors[LAUNCH] = f_launch
    if fit_offload:
        factors[OFFLOAD] = f_offload
    return g, factors, max(0.0, h)


def fit_memory_offset(rows: Sequence[FitRow]) -> int | None:
    """Median (measured − predicted) bytes outside the allocator; None (not measured) when no run measured
    both sides: a run without memory figures says nothing about memory, not "+0 MiB"."""
    diffs = [r.measured_outside_allocator_bytes - r.predicted_outside_allocator_bytes for r in rows
             if r.measured_outside_allocator_bytes is not None and r.predicted_outside_allocator_bytes is not None]
    return int(statistics.median(diffs)) if diffs else None


def fit_gpu(gpu: str, rows: Sequence[FitRow], *, today: str | None = None,
            names: Mapping[str, str] | None = None) -> GpuCalibration:
    """The calibration of ``gpu`` from its runs (each fingerprint once: the last one given, in the place it was
    given last, so ``runs[-1]`` is the newest). Warns (logging) about factors at their bounds, runs the fit does not
    reproduce and runs of one workload that disagree; ``names`` (fingerprint -> where the run was read) names the
    runs in those warnings, the fingerprint alone otherwise."""
    unique = list({r.fingerprint: r for r in reversed(rows)}.values())[::-1]
    g, factors, host_s = fit_time(unique)
    cal = GpuCalibration(gpu=gpu, class_factors=factors, global_factor=g, host_s=host_s,
                         memory_offset_bytes=fit_memory_offset(unique), runs=tuple(unique),
                         stack=dict(unique[-1].stack), fitted=today or _dt.date.today().isoformat())
    log = logging.getLogger(__name__)
    if cal.at_bounds:
        stops = ", ".join(f"{c} ×{factors[c]:.2f} (its {where})" for c, where in sorted(cal.at_bounds.items()))
        log.warning(
            "calibration of %s: %s: the runs ask for more than the fit allows (factors ×%g to ×%g), so they are not "
            "reproduced; check their step times (one optimizer step of the workload each, in seconds)",
            gpu, stops, MIN_FACTOR, MAX_FACTOR)

    def name(r: FitRow) -> str:
        where = (names or {}).get(r.fingerprint)
        return f"run {r.fingerprint} ({where})" if where else f"run {r.fingerprint}"

    for group in cal.disagreeing:
        fast, slow = group[0].measured_step_time_s, group[-1].measured_step_time_s
        log.warning(
            "calibration of %s: runs of one workload (the same shipped prediction) measured %s: %.2fx apart, more "
            "than the %.0f%% two runs of one job on one GPU may differ by, and the fit lands between them; keep the "
            "right one (`gpuwise calibrate --forget FINGERPRINT` drops a run)",
            gpu, ", ".join(f"{duration_text(r.measured_step_time_s)} ({name(r)})" for r in group), slow / fast,
            100 * SAME_WORKLOAD_TOLERANCE)
    if cal.stacks:
        log.warning("calibration of %s: %s", gpu, mixed_stacks_text(cal))
    off = [r for r in unique if r.fingerprint in cal.unreproduced]
    if off:
        log.warning(
            "calibration of %s: %d of its %d runs not reproduced (calibrated more than %gx off its measurement): %s; "
            "such a run pulls the others' factors without being followed: check its step time, or drop it "
            "(`gpuwise calibrate --forget FINGERPRINT`)",
            gpu, len(off), len(unique), UNREPRODUCED_RATIO,
            "; ".join(f"{name(r)} measured {duration_text(r.measured_step_time_s)}, calibrated "
                      f"{duration_text(cal.step_time_s(r))} ({error_text(cal.unreproduced[r.fingerprint])})"
                      for r in off))
    return cal
