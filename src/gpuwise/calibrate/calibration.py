"""What the runs on one GPU kind taught (``GpuCalibration``): the fitted factors, host term and memory offset, the
runs they were fitted on, and what it says of them (the factors at the fit's bounds, the runs it does not
reproduce, the runs of one workload that disagree), in ``--json`` and in words (``duration_text``, ``error_text``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gpuwise.calibrate.evidence import same_workload_disagreements, stack_groups
from gpuwise.calibrate.step import LAUNCH, OFFLOAD, CalibratedStep, FitRow, compose

MIN_FACTOR = 0.05              # no class gets 20× faster than the shipped model says
MAX_FACTOR = 50.0
BOUND_TOLERANCE = 1e-3         # a factor this close (relatively) to MIN_FACTOR or MAX_FACTOR is at it
# A run whose calibrated step is more than this factor off its measurement (either way) is not reproduced: the
# fit cannot follow it with the others (one run alone lands within 1 %), so it is warned about and listed.
UNREPRODUCED_RATIO = 1.5
SHOWN_HOST_S = 5e-6            # a host term under this is said as none (printed as +0.01 ms and up)
FACTOR_DECIMALS = 2            # a factor is printed ×1.23: one within the rounding of 1 (×1.00) changes nothing


def factor_text(factor: float) -> str:
    """A class's factor as every calibration line prints it: "×1.66"."""
    return f"×{factor:.{FACTOR_DECIMALS}f}"


def scales(factor: float) -> bool:
    """Whether a fitted factor is a change: not one that prints as ×1.00 (the shipped model, within rounding)."""
    return factor_text(factor) != factor_text(1.0)


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
    def scaled_factors(self) -> dict[str, float]:
        """The fitted factors that change a step (``scales``), exact, the farthest from 1 first."""
        return {c: f for c, f in sorted(self.class_factors.items(), key=lambda kv: -abs(kv[1] - 1)) if scales(f)}

    @property
    def unchanged_classes(self) -> list[str]:
        """The classes fitted at ×1.00 (within rounding): the runs confirmed the shipped model there."""
        return sorted(c for c, f in self.class_factors.items() if not scales(f))

    @property
    def scaled_text(self) -> str:
        """"conv/fp16 ×1.66, norm/fp16 ×1.62", or "" where no factor changes a step."""
        return ", ".join(f"{c} {factor_text(f)}" for c, f in self.scaled_factors.items())

    @property
    def summary(self) -> str:
        """The label with what it scales and adds: "calibrated with 1 of your runs on X (scaled: launch ×1.02, …;
        host +6.99 ms per step beside the kernels' issue; every other class as shipped; memory not measured: as
        shipped)"; what recommend prints per GPU. A class fitted at ×1.00 is one of the others."""
        host = (f"; host +{self.host_s * 1e3:.2f} ms per step beside the kernels' issue"
                if self.host_s >= SHOWN_HOST_S else "")
        memory = ("memory not measured: as shipped" if self.memory_offset_bytes is None else
                  f"memory outside the allocator {self.memory_offset_bytes / 2**20:+.0f} MiB")
        return f"{self.label} (scaled: {self.scaled_text or 'nothing'}{host}; every other class as shipped; {memory})"

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
        """The fitted factor of a class with evidence (``evidence.fitted_classes``); 1 (the shipped model) otherwise.
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

    @property
    def stacks(self) -> dict[str, tuple[str, ...]]:
        """Kernel stack ("torch 2.5.1, cuda 12.4") -> the fingerprints of the runs that measured it, oldest first, where
        the runs measured more than one (the fit mixes them); {} where they measured one."""
        groups = stack_groups(self.runs)
        return {k: tuple(r.fingerprint for r in v) for k, v in groups.items()} if len(groups) > 1 else {}

    def run_step_times(self) -> list[dict]:
        """Per run, oldest first, what ``gpuwise calibrate`` lists of it: its fingerprint, measured, calibrated and
        shipped step time (seconds), and the calibrated one's error ((calibrated − measured) / measured)."""
        errors, off = self.residuals, self.unreproduced
        return [{"fingerprint": r.fingerprint, "measured_step_time_s": r.measured_step_time_s,
                 "calibrated_step_time_s": self.step_time_s(r), "shipped_step_time_s": r.predicted_step_time_s,
                 "error": errors[r.fingerprint], "reproduced": r.fingerprint not in off} for r in self.runs]

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "label": self.label, "class_factors": dict(self.class_factors),
                "scaled_factors": self.scaled_factors, "unchanged_classes": self.unchanged_classes,
                "global_factor": self.global_factor, "host_s": self.host_s,
                "memory_offset_bytes": self.memory_offset_bytes, "runs": len(self.runs), "at_bounds": self.at_bounds,
                "run_fingerprints": [r.fingerprint for r in self.runs], "run_step_times": self.run_step_times(),
                "unreproduced": self.unreproduced,
                "disagreeing": [[r.fingerprint for r in group] for group in self.disagreeing],
                "mixed_stacks": {k: list(v) for k, v in self.stacks.items()},
                "stack": dict(self.stack), "fitted": self.fitted}


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


def mixed_stacks_text(cal: GpuCalibration) -> str:
    """Where ``cal``'s runs measured several kernel stacks (``GpuCalibration.stacks``), in words: which, and how to keep
    the current one's runs alone; "" where they measured one."""
    if not cal.stacks:
        return ""
    said = "; ".join(f"{stack} ({len(fps)} run(s): {', '.join(fps)})" for stack, fps in cal.stacks.items())
    return (f"its runs measured {len(cal.stacks)} stacks, {said}, and the fit mixes them: if you have left a stack "
            f"behind (an upgrade), drop its runs (`gpuwise calibrate --forget FINGERPRINT`, or `gpuwise calibrate "
            f"--reset --gpu {cal.gpu}` and calibrate the new runs again)")
