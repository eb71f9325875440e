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

Evidence. A factor applies only to a class the runs give evidence for (``fitted_classes``, what both the fit and a
reloaded file keep): one that carried at least ``MIN_CLASS_SHARE`` (5 %) of at least one run's predicted step time,
and ``launch`` also where a run measured less than the host's side alone allows (``faster_than_host_side``: only a
faster host issue reproduces it, however small the wait for the host was). Every other class, above all one no run
exercised (another operator or another precision: ``conv/fp16`` after fp32 MLP runs), keeps the shipped
model (factor 1). Why 5 %: a class below it moves no run's predicted step by more than 5 % × (f − 1), which
the measured medians (a few % apart run to run) cannot tell from the other classes' factors, so the fit's
value for it is only the common scale ``g`` of the classes that did carry the runs. ``g`` is reported, never
applied to an unseen class: a slow 3 ms host-bound MLP says nothing of a ResNet's convolutions (it once
turned a 36 ms ResNet-50 step into 169 ms).

Memory. What the caching allocator does not hold (CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers)
depends on the stack: the offset is the median, over runs that measured both, of (NVML process memory −
torch max reserved) − (predicted total − predicted reserved); None ("not measured", never applied) when no run
measured both.
"""

from __future__ import annotations

import datetime as _dt
import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.runtime.llm import OFFLOAD_CLASS
from gpuwise.runtime.predict import SMOOTH_MAX_P, smooth_max
from gpuwise.workload.precision import parse

GLOBAL_PRIOR_WEIGHT = 1e-3     # (ln g)²: a whisper, so one run is followed to within ~0.5 % at any scale
CLASS_PRIOR_WEIGHT = 1e-2      # δ_c²: a class ×1.5 apart from the others costs as much as a 4 % residual
# (ln f_launch)²: weak below 1 (a faster host than the priors: harmless elsewhere); firm above 1, where the
# host term explains a slow host side instead (a factor would scale every other job's issue time with it)
HOST_FACTOR_PRIOR_WEIGHT = {"down": 1e-3, "up": 1e-2}
HOST_PRIOR_WEIGHT = 1e-3       # ln(1 + h / median issue time)²: as weak as g's, on the host's side
MIN_FACTOR = 0.05              # no class gets 20× faster than the shipped model says
MAX_FACTOR = 50.0
BOUND_TOLERANCE = 1e-3         # a factor this close (relatively) to MIN_FACTOR or MAX_FACTOR is at it
MIN_CLASS_SHARE = 0.05         # a factor needs this share of one run's predicted step (module docstring)
# A run whose calibrated step is more than this factor off its measurement (either way) is not reproduced: the
# fit cannot follow it with the others (one run alone lands within 1 %), so it is warned about and listed.
UNREPRODUCED_RATIO = 1.5
# Runs with the same shipped prediction (the same workload on the same GPU, as far as the fit can see) whose
# measured steps differ by more than this share of the faster one disagree: measured medians of one job on one
# GPU are a few % apart run to run; beyond 25 % one of them measured something else, and the fit lands between.
SAME_WORKLOAD_TOLERANCE = 0.25
LAUNCH = "launch"              # the shipped wait for the host; its factor scales the host's issue time
HOST = "host"                  # the host term's visible share of a calibrated step (never a predicted class)
OFFLOAD = OFFLOAD_CLASS        # an offloaded step's CPU optimizer step and PCIe copies, in series with the GPU's
UNKEYED = (LAUNCH, HOST, OFFLOAD)   # not the GPU's kernels: the same whatever the arithmetic
# (ln f_offload)²: weaker than g's, so an offloaded run's gap is the CPU part's, not the GPU classes' (fit docstring)
OFFLOAD_PRIOR_WEIGHT = 1e-4
# A run's memory figures the offset needs (Measurement's names), as said when one is missing
MEMORY_FIGURES = {"process_memory_bytes": "the job's process memory (NVML)",
                  "peak_reserved_bytes": "PyTorch's peak reserved memory"}
SHOWN_HOST_S = 5e-6            # a host term under this is said as none (printed as +0.01 ms and up)


def class_key(cls: str, precision, gpu) -> str:
    """The fitted unit: an operator class at the peak its kernels run at on ``gpu`` (``Precision.rate_key``,
    the time model's own answer: an fp32 convolution is ``conv/tf32`` on Ampere and newer)."""
    return cls if cls in UNKEYED else f"{cls}/{parse(precision).rate_key(gpu, cls)}"


def on_device(cls: str) -> bool:
    """Whether a class is the GPU's kernels: not the wait for the host's issue (``launch``), the host term's share
    (``host``) nor an offloaded step's CPU part (``offload``)."""
    return cls not in UNKEYED


@dataclass(frozen=True)
class FitRow:
    """One measured run as the fit needs it: the shipped model's prediction beside the measurement."""

    fingerprint: str                          # sha256 of the measurement: the same run counts once
    predicted_by_class_s: Mapping[str, float]
    predicted_other_s: float                  # predicted step time outside the classes
    measured_step_time_s: float
    predicted_outside_allocator_bytes: int | None = None   # total − reserved
    measured_outside_allocator_bytes: int | None = None    # NVML process memory − torch max reserved
    stack: Mapping[str, str] = field(default_factory=dict)  # driver, cuda, torch
    predicted_host_s: float | None = None     # host issue time (StepTime.host_s); None: implied by "launch"
    # the memory figures the run lacked (MEMORY_FIGURES' keys), so that "not measured" can say which; () also for a
    # run stored before this was kept
    unmeasured_memory: tuple[str, ...] = ()

    @property
    def predicted_step_time_s(self) -> float:
        return sum(self.predicted_by_class_s.values()) + self.predicted_other_s


@dataclass(frozen=True)
class CalibratedStep:
    """A step's compute time under a calibration. ``by_class_s`` sums to ``compute_s``: the device classes
    scaled, ``launch`` (the GPU's wait for the host's issue time) and ``host`` (the host term's visible share:
    0 where the GPU's work hides it)."""

    by_class_s: dict[str, float]
    compute_s: float
    device_s: float            # the device classes' seconds, scaled (an offloaded step's CPU part not among them)
    host_side_s: float         # the host's seconds: f_launch × issue time + host term


def implied_host_s(device_s: float, launch_s: float) -> float:
    """The issue time a shipped "launch" wait implies when the prediction does not say it (a row stored before
    it did): the H with smooth_max(D, H) = D + launch."""
    if launch_s <= 0:
        return 0.0
    p = SMOOTH_MAX_P
    return max(0.0, (device_s + launch_s) ** p - device_s ** p) ** (1.0 / p)


def compose(by_class_s: Mapping[str, float], host_s: float | None, factor: Callable[[str], float],
            host_factor: float = 1.0, extra_host_s: float = 0.0, offload_factor: float = 1.0) -> CalibratedStep:
    """The calibrated compute of a shipped step (module docstring): device classes × their factors, the host's
    issue time × ``host_factor`` + ``extra_host_s``, composed by the step model's smooth maximum, and an offloaded
    step's CPU part × ``offload_factor`` after it. Factors of 1 and no host term give the shipped ``by_class_s``
    back."""
    device = {c: s for c, s in by_class_s.items() if on_device(c)}
    d0 = sum(device.values())
    w0 = float(by_class_s.get(LAUNCH, 0.0))
    h0 = host_s if host_s is not None and host_s > 0 else implied_host_s(d0, w0)
    shipped = smooth_max(d0, h0)
    anchor = d0 + w0 - shipped                     # the shipped step's per-phase excess over one smooth max
    scaled = {c: s * factor(c) for c, s in device.items()}
    d1 = sum(scaled.values())
    issue_s = host_factor * h0
    base = smooth_max(d1, issue_s)
    out = {**scaled, LAUNCH: max(0.0, base + (anchor * base / shipped if shipped > 0 else 0.0) - d1)}
    if OFFLOAD in by_class_s:
        out[OFFLOAD] = float(by_class_s[OFFLOAD]) * offload_factor
    if extra_host_s > 0:
        out[HOST] = smooth_max(d1, issue_s + extra_host_s) - base
    return CalibratedStep(by_class_s=out, compute_s=sum(out.values()), device_s=d1,
                          host_side_s=issue_s + max(0.0, extra_host_s))


@dataclass(frozen=True)
class GpuCalibration:
    """What the runs on one GPU kind taught: applied to every estimate on that GPU (``calibrate.apply``)."""

    gpu: str
    class_factors: Mapping[str, float]        # class_key -> factor, only classes with evidence; any other: 1
    global_factor: float                      # the fit's common scale: reported, not applied to other classes
    host_s: float
    memory_offset_bytes: int | None           # None: no run measured memory, nothing applied
    runs: tuple[FitRow, ...]
    stack: Mapping[str, str] = field(default_factory=dict)   # of the newest run
    fitted: str = ""                          # ISO date

    @property
    def label(self) -> str:
        return f"calibrated with {len(self.runs)} of your runs on {self.gpu}"

    @property
    def scope(self) -> str:
        """What it corrects: "step times", and "memory" only where a run measured it (``memory_offset_bytes``)."""
        return "step times" if self.memory_offset_bytes is None else "step times and memory"

    @property
    def summary(self) -> str:
        """The label with what it scales and adds: "calibrated with 1 of your runs on X (scaled: launch ×1.02, …;
        host +6.99 ms per step beside the kernels' issue; every other class as shipped; memory not measured: as
        shipped)"; what recommend prints per GPU."""
        scaled = ", ".join(f"{c} ×{f:.2f}"
                           for c, f in sorted(self.class_factors.items(), key=lambda kv: -abs(kv[1] - 1)))
        host = (f"; host +{self.host_s * 1e3:.2f} ms per step beside the kernels' issue"
                if self.host_s >= SHOWN_HOST_S else "")
        memory = ("memory not measured: as shipped" if self.memory_offset_bytes is None else
                  f"memory outside the allocator {self.memory_offset_bytes / 2**20:+.0f} MiB")
        return f"{self.label} (scaled: {scaled or 'nothing'}{host}; every other class as shipped; {memory})"

    @property
    def at_bounds(self) -> dict[str, str]:
        """Class -> "floor" or "ceiling" for each factor the fit stopped at ``MIN_FACTOR`` or ``MAX_FACTOR``: the
        runs asked for more than the fit allows, so that class does not reproduce them."""
        out = {}
        for cls, f in self.class_factors.items():
            if f <= MIN_FACTOR * (1 + BOUND_TOLERANCE):
                out[cls] = "floor"
            elif f >= MAX_FACTOR * (1 - BOUND_TOLERANCE):
                out[cls] = "ceiling"
        return out

    def factor(self, cls: str) -> float:
        """The fitted factor of a class with evidence (``supported_classes``); 1 (the shipped model) otherwise.
        ``launch``'s scales the host's issue time (the wait for it follows from the composition)."""
        return float(self.class_factors.get(cls, 1.0))

    def compose(self, by_class_s: Mapping[str, float], host_s: float | None,
                key: Callable[[str], str] = lambda c: c) -> CalibratedStep:
        """A shipped step's classes (``key`` maps a class to its ``class_key``) and host issue time, calibrated."""
        return compose(by_class_s, host_s, lambda c: self.factor(key(c)), self.factor(LAUNCH), self.host_s,
                       self.factor(OFFLOAD))

    def step_time_s(self, row: FitRow) -> float:
        """The calibrated step time of a run's shipped prediction (what ``apply`` gives its workload)."""
        return self.compose(row.predicted_by_class_s, row.predicted_host_s).compute_s + row.predicted_other_s

    @property
    def residuals(self) -> dict[str, float]:
        """Fingerprint -> (calibrated − measured) / measured step time of each run it was fitted on."""
        return {r.fingerprint: self.step_time_s(r) / r.measured_step_time_s - 1 for r in self.runs}

    @property
    def unreproduced(self) -> dict[str, float]:
        """The residuals of the runs the fit does not reproduce: calibrated more than ``UNREPRODUCED_RATIO`` off."""
        return {fp: e for fp, e in self.residuals.items()
                if not 1 / UNREPRODUCED_RATIO <= 1 + e <= UNREPRODUCED_RATIO}

    @property
    def disagreeing(self) -> list[tuple[FitRow, ...]]:
        """Runs of one workload (``same_workload``) whose step times differ by more than ``SAME_WORKLOAD_TOLERANCE``,
        fastest first."""
        return same_workload_disagreements(self.runs)

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "label": self.label, "class_factors": dict(self.class_factors),
                "global_factor": self.global_factor, "host_s": self.host_s,
                "memory_offset_bytes": self.memory_offset_bytes, "runs": len(self.runs), "at_bounds": self.at_bounds,
                "run_fingerprints": [r.fingerprint for r in self.runs], "unreproduced": self.unreproduced,
                "disagreeing": [[r.fingerprint for r in group] for group in self.disagreeing],
                "stack": dict(self.stack), "fitted": self.fitted}


def same_workload(row: FitRow) -> tuple:
    """What tells runs of one workload apart on one GPU without its name (never stored): the shipped prediction,
    per class and host issue time (4 significant digits). Two workloads that share it are one point to the fit."""
    return (tuple(sorted((c, f"{s:.4g}") for c, s in row.predicted_by_class_s.items())),
            f"{row.predicted_other_s:.4g}", f"{row.predicted_host_s or 0.0:.4g}")


def same_workload_disagreements(rows: Sequence[FitRow]) -> list[tuple[FitRow, ...]]:
    """Each group of runs of one workload (``same_workload``) whose slowest measured step is more than
    ``SAME_WORKLOAD_TOLERANCE`` over its fastest, fastest first."""
    groups: dict[tuple, list[FitRow]] = {}
    for r in rows:
        groups.setdefault(same_workload(r), []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: r.measured_step_time_s)
        fastest_s, slowest_s = group[0].measured_step_time_s, group[-1].measured_step_time_s
        if slowest_s > (1 + SAME_WORKLOAD_TOLERANCE) * fastest_s:
            out.append(tuple(group))
    return out


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


@dataclass(frozen=True)
class ShippedSides:
    """A run's shipped step as the composition sees it (``compose``): the device classes' seconds, the host's issue
    time and the step's relative excess over one smooth maximum of the two (one per phase in the shipped model)."""

    device_s: float
    issue_s: float
    excess: float


def shipped_sides(row: FitRow) -> ShippedSides:
    """``row``'s shipped device seconds, host issue time (``implied_host_s`` where the row does not say it) and excess."""
    device_s = sum(s for c, s in row.predicted_by_class_s.items() if on_device(c))
    wait_s = float(row.predicted_by_class_s.get(LAUNCH, 0.0))
    issue_s = row.predicted_host_s if row.predicted_host_s else implied_host_s(device_s, wait_s)
    both_s = smooth_max(device_s, issue_s)
    return ShippedSides(device_s=device_s, issue_s=issue_s,
                        excess=(device_s + wait_s - both_s) / both_s if both_s > 0 else 0.0)


def faster_than_host_side(row: FitRow) -> bool:
    """Whether ``row`` measured less than its host's side alone allows (the issue time, with the step's excess, and
    what runs in series with it): no device factor reproduces it, only a faster issue (``launch``'s factor)."""
    sides = shipped_sides(row)
    host_side_s = (sides.issue_s * (1 + sides.excess) + row.predicted_other_s
                   + row.predicted_by_class_s.get(OFFLOAD, 0.0))
    return sides.issue_s > 0 and row.measured_step_time_s < host_side_s


def fitted_classes(rows: Sequence[FitRow]) -> set[str]:
    """The classes a fit of ``rows`` gives a factor, the one rule the fit and a reloaded file (``store``) share: those
    with evidence (``supported_classes``), and ``launch`` where some run was faster than its host's side alone."""
    kept = supported_classes(rows)
    if any(faster_than_host_side(r) for r in rows):
        kept.add(LAUNCH)
    return kept


def supported_classes(rows: Sequence[FitRow]) -> set[str]:
    """Classes with evidence: at least ``MIN_CLASS_SHARE`` of some run's predicted step time."""
    out = set()
    for r in rows:
        total = r.predicted_step_time_s
        if total > 0:
            out |= {c for c, s in r.predicted_by_class_s.items() if s >= MIN_CLASS_SHARE * total}
    return out


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


def duration_text(seconds: float) -> str:
    """A step time as the warnings print it: "31 ms", "0.001 ms", "1.65 s" (seconds from what rounds to 1000 ms up,
    never "1e+03 ms")."""
    return f"{seconds * 1e3:.3g} ms" if seconds * 1e3 < 999.5 else f"{seconds:.3g} s"


def error_text(error: float) -> str:
    """A relative error (calibrated − measured) / measured in words: "+20%", "-40%", "±0%"; a factor past 10x."""
    ratio = 1 + error
    if ratio >= 10:
        return f"{ratio:,.0f}x the measurement"
    if ratio <= 0.1:
        return f"{ratio:.2g}x the measurement"
    return "±0%" if abs(error) < 0.005 else f"{error:+.0%}"
