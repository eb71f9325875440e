"""A measured run as the fit sees it (``FitRow``: the shipped model's prediction beside the measurement), the units
it is fitted in (``class_key``), and a shipped step composed under a calibration's factors and host term
(``compose``): the composition ``fit`` fits and ``apply`` applies (the formula: ``fit``'s module docstring), with
the two sides of a shipped step it starts from (``shipped_sides``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gpuwise.runtime.llm import OFFLOAD_CLASS
from gpuwise.runtime.predict import SMOOTH_MAX_P, smooth_max
from gpuwise.workload.precision import parse

LAUNCH = "launch"              # the shipped wait for the host; its factor scales the host's issue time
HOST = "host"                  # the host term's visible share of a calibrated step (never a predicted class)
OFFLOAD = OFFLOAD_CLASS        # an offloaded step's CPU optimizer step and PCIe copies, in series with the GPU's
UNKEYED = (LAUNCH, HOST, OFFLOAD)   # not the GPU's kernels: the same whatever the arithmetic
# A run's memory figures the offset needs (Measurement's names), as said when one is missing
MEMORY_FIGURES = {"process_memory_bytes": "the job's process memory (NVML)",
                  "peak_reserved_bytes": "PyTorch's peak reserved memory"}


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
    # the most memory the run measured that was the job's own (``rows.own_peak_bytes``): its process memory (NVML, what
    # nvidia-smi shows) where matched by the job's pids, else PyTorch's peak reserved; an estimate of the same job
    # (``job_key``) on that GPU is never below it (``apply.corrected_memory``). None: not measured
    measured_peak_bytes: int | None = None
    # the run's job (``evidence.job_key``: its workload record, hashed), which an estimate's must be for the floor
    # above; None: a run stored before it was kept (it floors nothing)
    job_key: str | None = None

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
