"""What gpuwise predicts for a measured job on the GPU it ran on, next to what the run measured.

The prediction is the one ``gpuwise estimate`` makes for the log's workload on that GPU (with the user's
calibration when one applies, and the answer says so); the signed error is (predicted − measured) /
measured, so +10 % means gpuwise predicted 10 % too much.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.catalog import GPU
from gpuwise.errors import GpuwiseError
from gpuwise.plan.profile import model_for
from gpuwise.plan.scaling import PREDICTED_METHOD, TimeScaling, time_scaling
from gpuwise.report.measured import Measurement, measurement_from, workload_of
from gpuwise.report.sources import UsageLog


@dataclass(frozen=True)
class Figure:
    name: str                  # "step time", "peak allocated", "peak reserved", "nvidia-smi total"
    unit: str                  # "s" or "bytes"
    predicted: float | None
    measured: float | None

    @property
    def signed_error(self) -> float | None:
        """(predicted − measured) / measured; None where either side is missing."""
        if self.predicted is None or not self.measured:
            return None
        return (self.predicted - self.measured) / self.measured

    def to_dict(self) -> dict:
        e = self.signed_error
        return {"name": self.name, "unit": self.unit, "predicted": self.predicted, "measured": self.measured,
                "signed_error": e, "abs_error": None if e is None else abs(e)}


@dataclass(frozen=True)
class PredictedVsMeasured:
    gpu: str
    workload: dict
    calibration: str | None            # "calibrated with 3 of your runs on rtx-4090"; None: the shipped model
    figures: tuple[Figure, ...]

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "workload": self.workload, "calibration": self.calibration,
                "figures": [f.to_dict() for f in self.figures]}


def compare(measured: Measurement, gpu: GPU, progress: Callable[[str], None] | None = None) -> PredictedVsMeasured:
    """The estimate of ``measured.workload`` on ``gpu`` beside the measurement; GpuwiseError (a bad
    workload record, a model that cannot be traced) is the caller's to turn into a note."""
    if measured.workload is None:
        raise GpuwiseError("the run log records no workload (run it under `gpuwise run --model SPEC …` "
                           "or give the guard workload=…)")
    workload = workload_of(measured.workload)
    est = model_for(workload, progress).estimate(gpu, count=workload.num_gpus)
    mem = est.memory
    figures = (
        Figure("step time", "s", est.time.step_time_s if est.time else None, measured.step_time_s),
        Figure("peak allocated", "bytes", mem.peak_allocated_bytes, measured.peak_allocated_bytes),
        Figure("peak reserved", "bytes", mem.peak_reserved_bytes, measured.peak_reserved_bytes),
        Figure("nvidia-smi total", "bytes", mem.total_bytes, measured.process_memory_bytes),
    )
    return PredictedVsMeasured(gpu.id, workload.to_dict(), est.calibration, figures)


def measured_against_prediction(
    log: UsageLog, rented: GPU | None, scaling: TimeScaling | None, notes: list[str],
) -> tuple[PredictedVsMeasured | None, TimeScaling | None]:
    """(the comparison on the rented GPU, the time scaling to use) for a run log that records its workload.

    ``scaling`` given (``--model``) wins; else the log's workload gives the time predictor's ratios, so the
    measured run stays the anchor and moves to other GPUs by the runtime's per-GPU ratios. What cannot be
    predicted becomes a line in ``notes``, never an error: the usage report stands without it."""
    if log.source != "gpuwise run log" or not log.meta.get("workload"):
        return None, scaling
    measured = measurement_from(log)
    if measured.workload is None:
        notes.append("the run log's workload record is not readable: no prediction to compare with")
        return None, scaling
    try:
        workload = workload_of(measured.workload)
        if scaling is None or scaling.method != PREDICTED_METHOD:
            scaling = time_scaling(workload.precision, workload)
            notes.append("time on other GPUs: the measured step time scaled by the time predictor's ratios "
                         "for the workload the run log records")
        comparison = compare(measured, rented) if rented is not None else None
    except (GpuwiseError, TypeError) as exc:
        notes.append(f"no prediction for the run log's workload: {str(exc)[:200]}")
        return None, scaling
    return comparison, scaling


def comparison_lines(c: PredictedVsMeasured) -> list[str]:
    """The comparison in words, one line per figure (the terminal and HTML reports share it)."""
    from gpuwise.units import format_bytes, format_duration

    def fmt(f: Figure, x: float | None) -> str:
        if x is None:
            return "-"
        return format_duration(x) if f.unit == "s" else format_bytes(int(x))

    basis = c.calibration or "shipped model, no calibration of yours"
    lines = [f"Predicted vs measured on {c.gpu} ({basis}):"]
    for f in c.figures:
        e = f.signed_error
        err = f"{e:+.1%}" if e is not None else "not measured" if f.measured is None else "-"
        lines.append(f"  {f.name:<17} predicted {fmt(f, f.predicted):>10}  measured {fmt(f, f.measured):>10}  error {err}")
    return lines
