"""The fit: what measured runs on one GPU say about the shipped time and memory model there.

Time. For run *i* the shipped model predicts seconds per operator class ``p_ic`` (``StepTime.by_class_s``,
"launch" included; a class is keyed by the peak its kernels run at on that GPU, ``conv/fp16`` apart from
``conv/fp32``: tensor-core and CUDA-core kernels miss the datasheet by different amounts) and ``o_i`` seconds outside them (communication, input wait); the run measured ``T_i``.
The calibrated step time is ``Σ_c f_c · p_ic + h + o_i`` with one factor ``f_c = g + d_c`` per class and a
host term ``h`` ≥ 0 (seconds per step the GPU model does not see: data loading, Python, logging). The fit
minimises the relative residuals plus priors: ``g`` near 1 (weakly: one run moves the prediction almost all
the way to it), the class deviations ``d_c`` and ``h`` near 0 (firmly: they need runs that tell the classes
and batch sizes apart). So one run scales every class it exercised alike; varied runs separate them. Never
by model name.

Evidence. A factor applies only to a class the runs give evidence for: one that carried at least
``MIN_CLASS_SHARE`` (5 %) of at least one run's predicted step time. Every other class, above all one no run
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
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


from gpuwise.calibrate.errors import CalibrateError
from gpuwise.workload.precision import parse

GLOBAL_PRIOR_WEIGHT = 1e-3     # (g − 1)²: a whisper, so one run is followed to within ~1 %
CLASS_PRIOR_WEIGHT = 1e-2      # d_c²: a class deviation of 0.5 costs as much as a 5 % residual
HOST_PRIOR_WEIGHT = 1e-1       # (h / median T)²: firmer, so one run is read as a factor, not as host time
MIN_FACTOR = 0.05              # no class gets 20× faster than the shipped model says
MAX_FACTOR = 50.0
MIN_CLASS_SHARE = 0.05         # a factor needs this share of one run's predicted step (module docstring)
UNKEYED = ("launch", "host")   # host-side time: the same whatever the arithmetic


def class_key(cls: str, precision, gpu) -> str:
    """The fitted unit: an operator class at the peak its kernels run at on ``gpu`` (``Precision.rate_key``,
    the time model's own answer: an fp32 convolution is ``conv/tf32`` on Ampere and newer)."""
    return cls if cls in UNKEYED else f"{cls}/{parse(precision).rate_key(gpu, cls)}"


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

    @property
    def predicted_step_time_s(self) -> float:
        return sum(self.predicted_by_class_s.values()) + self.predicted_other_s


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
    def summary(self) -> str:
        """The label with what it scales: "calibrated with 1 of your runs on X (scaled: launch ×4.89, …;
        every other class as shipped)"; what recommend prints per GPU."""
        scaled = ", ".join(f"{c} ×{f:.2f}" for c, f in sorted(self.class_factors.items(), key=lambda kv: -abs(kv[1] - 1)))
        return f"{self.label} (scaled: {scaled or 'nothing'}; every other class as shipped)"

    def factor(self, cls: str) -> float:
        """The fitted factor of a class with evidence (``supported_classes``); 1 (the shipped model) otherwise."""
        return float(self.class_factors.get(cls, 1.0))

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "label": self.label, "class_factors": dict(self.class_factors),
                "global_factor": self.global_factor, "host_s": self.host_s,
                "memory_offset_bytes": self.memory_offset_bytes, "runs": len(self.runs),
                "stack": dict(self.stack), "fitted": self.fitted}


def fit_time(rows: Sequence[FitRow]) -> tuple[float, dict[str, float], float]:
    """(global factor g, per-class factors, host seconds per step) by bounded linear least squares. Only
    classes with evidence (``supported_classes``) are fitted; the others are held at 1 (their seconds count
    as predicted), so one run still lands on its measurement through the classes that carried it."""
    supported = supported_classes(rows)
    classes = sorted({c for r in rows for c, s in r.predicted_by_class_s.items() if s > 0 and c in supported})
    if not rows or not classes:
        raise CalibrateError("no run with a predicted step time to calibrate on")
    n_cls = len(classes)
    a_rows, b = [], []
    for r in rows:
        t = r.measured_step_time_s
        p = [r.predicted_by_class_s.get(c, 0.0) / t for c in classes]
        a_rows.append([sum(p), *p, 1.0 / t])
        held = sum(s for c, s in r.predicted_by_class_s.items() if c not in supported)
        b.append((t - r.predicted_other_s - held) / t)
    scale_s = statistics.median(r.measured_step_time_s for r in rows)
    width = n_cls + 2
    import numpy as np                       # imported here: loading a calibration needs neither
    from scipy.optimize import lsq_linear

    prior = np.zeros((width, width))
    prior[0, 0] = GLOBAL_PRIOR_WEIGHT ** 0.5
    for k in range(n_cls):
        prior[k + 1, k + 1] = CLASS_PRIOR_WEIGHT ** 0.5
    prior[-1, -1] = HOST_PRIOR_WEIGHT ** 0.5 / scale_s
    target = np.zeros(width)
    target[0] = GLOBAL_PRIOR_WEIGHT ** 0.5          # g → 1
    a = np.vstack([np.array(a_rows), prior])
    rhs = np.concatenate([np.array(b), target])
    lower = [MIN_FACTOR] + [-MAX_FACTOR] * n_cls + [0.0]
    upper = [MAX_FACTOR] + [MAX_FACTOR] * n_cls + [np.inf]
    x = lsq_linear(a, rhs, bounds=(lower, upper)).x
    g = float(x[0])
    factors = {c: float(min(max(g + x[k + 1], MIN_FACTOR), MAX_FACTOR)) for k, c in enumerate(classes)}
    return g, factors, float(x[-1])


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


def fit_gpu(gpu: str, rows: Sequence[FitRow], *, today: str | None = None) -> GpuCalibration:
    """The calibration of ``gpu`` from its runs (each fingerprint once, the last one kept)."""
    unique = list({r.fingerprint: r for r in rows}.values())
    g, factors, host_s = fit_time(unique)
    return GpuCalibration(gpu=gpu, class_factors=factors, global_factor=g, host_s=host_s,
                          memory_offset_bytes=fit_memory_offset(unique), runs=tuple(unique),
                          stack=dict(unique[-1].stack), fitted=today or _dt.date.today().isoformat())
