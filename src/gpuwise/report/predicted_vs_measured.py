"""What gpuwise predicts for a measured job on the GPU it ran on, next to what the run measured.

The prediction is the one ``gpuwise estimate`` makes for the log's workload on that GPU (with the user's
calibration when one applies, and the answer says so); the signed error is (predicted − measured) /
measured, so +10 % means gpuwise predicted 10 % too much.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from gpuwise.catalog import GPU
from gpuwise.errors import GpuwiseError
from gpuwise.plan import accuracy
from gpuwise.plan.profile import model_for
from gpuwise.plan.scaling import PREDICTED_METHOD, TimeScaling, time_scaling
from gpuwise.report.measured import (PRIVATE_MODEL, Measurement, measurement_from, public_model,
                                     unmeasured_step_time_why)
from gpuwise.report.rightsize import TIME_NOTE
from gpuwise.report.sources import UsageLog
from gpuwise.report.usage import UsageSummary
from gpuwise.units import format_bytes, format_duration
from gpuwise.workload import Workload
from gpuwise.workload.model import check_precision


@dataclass(frozen=True)
class Figure:
    name: str                  # "step time", "peak allocated", "peak reserved", "nvidia-smi total"
    unit: str                  # "s" or "bytes"
    predicted: float | None
    measured: float | None
    # of "nvidia-smi total": "process" (NVML's memory of the job's processes) or "used" (the GPU's used memory,
    # where the driver gives no per-process figure: a container, an nvidia-smi CSV); None for the other figures
    measured_basis: str | None = None
    unmeasured_why: str | None = None    # why ``measured`` is None, in words ("3 steps, all warm-up")

    @property
    def label(self) -> str:
        """The name as printed: the GPU's used memory says it is that, not the job's processes'."""
        return f"{self.name} (GPU memory used)" if self.measured_basis == "used" else self.name

    @property
    def signed_error(self) -> float | None:
        """(predicted − measured) / measured; None where either side is missing."""
        if self.predicted is None or not self.measured:
            return None
        return (self.predicted - self.measured) / self.measured

    def to_dict(self) -> dict:
        e = self.signed_error
        return {"name": self.name, "unit": self.unit, "predicted": self.predicted, "measured": self.measured,
                "signed_error": e, "abs_error": None if e is None else abs(e), "measured_basis": self.measured_basis,
                "not_measured_why": self.unmeasured_why if self.measured is None else None}


@dataclass(frozen=True)
class PredictedVsMeasured:
    gpu: str
    workload: dict
    calibration: str | None            # "calibrated with 3 of your runs on rtx-4090"; None: the shipped model
    figures: tuple[Figure, ...]
    method: str = "traced"             # or "closed-form" (LLMs): no held-out runs measure its time error
    bound: str | None = None           # what bounds the predicted step ("input": the rate given sets it)
    regime: str | None = None          # the predicted step's regime (runtime.accuracy.REGIMES)
    in_sample: bool = False            # the calibration applied was fitted on this very run: its error is no check

    def likely_step_time_range_s(self) -> tuple[float, float] | None:
        """Where 8 in 10 held-out public runs measured, given the shipped model's prediction (runtime/accuracy.py);
        None with a calibration of the user's (the range is the shipped model's) or without a prediction."""
        step = next((f for f in self.figures if f.name == "step time"), None)
        return accuracy.likely_step_time_range_s(step.predicted if step else None, method=self.method,
                                                 bound=self.bound, calibrated=bool(self.calibration),
                                                 regime=self.regime)

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "workload": self.workload, "calibration": self.calibration,
                "figures": [f.to_dict() for f in self.figures], "in_sample": self.in_sample,
                "likely_step_time_range_s": self.likely_step_time_range_s()}


NO_TORCH_RECORD = "no PyTorch memory record (gpuwise run --torch-hook, or the guard, writes one)"


def compare(measured: Measurement, gpu: GPU, workload: Workload,
            progress: Callable[[str], None] | None = None, correction=None,
            gpu_used_bytes: int | None = None) -> PredictedVsMeasured:
    """The estimate of ``workload`` on ``gpu`` beside the measurement; GpuwiseError (a model that cannot be
    traced) is the caller's to turn into a note. The nvidia-smi total is set beside the job's process memory, or,
    where the log has none, beside ``gpu_used_bytes`` (the GPU's used memory at its peak), labelled so."""
    model = model_for(workload, progress, correction=correction)
    est = model.estimate(gpu, count=workload.num_gpus)
    mem = est.memory
    total_bytes, basis = ((measured.process_memory_bytes, "process") if measured.process_memory_bytes is not None
                          else (gpu_used_bytes, "used") if gpu_used_bytes is not None else (None, None))
    figures = (
        Figure("step time", "s", est.time.step_time_s if est.time else None, measured.step_time_s,
               unmeasured_why=unmeasured_step_time_why(measured.logged_steps, measured.timed_steps)),
        Figure("peak allocated", "bytes", mem.peak_allocated_bytes, measured.peak_allocated_bytes,
               unmeasured_why=NO_TORCH_RECORD),
        Figure("peak reserved", "bytes", mem.peak_reserved_bytes, measured.peak_reserved_bytes,
               unmeasured_why=NO_TORCH_RECORD),
        Figure("nvidia-smi total", "bytes", mem.total_bytes, total_bytes, basis),
    )
    return PredictedVsMeasured(gpu.id, workload.to_dict(), est.calibration, figures, model.method,
                               est.time.bound if est.time else None, est.time.regime if est.time else None)


def measured_against_prediction(
    log: UsageLog, usage: UsageSummary, rented: GPU | None, scaling: TimeScaling | None, notes: list[str],
    workload: Workload | None = None, correction=None,
    is_calibration_run: Callable[[Measurement, str], bool] | None = None, precision: str | None = None,
) -> tuple[PredictedVsMeasured | None, TimeScaling | None]:
    """(the comparison on the rented GPU, the time scaling to use) for a gpuwise run log; ``usage``: the
    report's ``summarize(log)`` (summarised once: a long log takes seconds).

    The workload is ``workload`` when the user gave it (``--model …``), else the one the log records when
    it names a public model: a log's local model file (``file.py:factory``) is never run on the log's word,
    since a log may come from anyone (a note says to pass ``--model``). With a workload, time on other GPUs
    is the measured run scaled by the time predictor's ratios, so the measurement stays the anchor. Without
    one that can be predicted, and no ``scaling`` given (``report`` gives one when ``--precision`` names the
    precision), the datasheet ratio is taken at the precision the log's workload records (a note says so).
    ``precision``: the user's ``--precision`` without ``--model``: it replaces the precision the log's workload
    records (``recorded_workload``), as ``advise``'s does.
    What cannot be predicted becomes a line in ``notes``, never an error: the usage report stands without it.
    ``is_calibration_run(measured, gpu_id)``: whether the user's calibration of that GPU was fitted on this run;
    where it was and the prediction is calibrated, the comparison is ``in_sample``."""
    if log.source != "gpuwise run log":
        if workload is None or rented is None:
            return None, scaling
        # an nvidia-smi/dmon log measures the memory the job used: the one figure to set beside --model's prediction
        process = usage.needed_peak_bytes if gpu_used_bytes(usage) is None else None
        measured = Measurement(gpu_name=usage.gpu_name, workload=None, step_time_s=None,
                               process_memory_bytes=process, source=str(log.path))
    else:
        measured = measurement_from(log, usage)
    used_bytes = gpu_used_bytes(usage)
    try:
        if workload is None and measured.workload is not None:
            if public_model(str(measured.workload.get("model", ""))) == PRIVATE_MODEL:
                notes.append("the run log's workload names a local model file: pass --model SPEC (with the same "
                             "workload options) to compare the run with gpuwise's prediction")
                return None, scaling or recorded_precision_scaling(measured, notes)
            workload = recorded_workload(measured.workload, precision)
        if workload is None or rented is None:    # no GPU to compare on, nor to scale from
            return None, scaling or (recorded_precision_scaling(measured, notes) if workload is None else None)
        # traces now: a workload that fails, fails here
        try:
            comparison = compare(measured, rented, workload, correction=correction, gpu_used_bytes=used_bytes)
        except GpuwiseError as exc:
            if correction is None:
                raise
            # the user's calibration cannot be applied (a damaged file): the shipped model's prediction, said so
            comparison = compare(measured, rented, workload, correction=None, gpu_used_bytes=used_bytes)
            notes.append(f"your calibration was not applied, the prediction is the shipped model's: {exc}")
            correction = None
        if comparison.calibration and is_calibration_run is not None and is_calibration_run(measured, rented.id):
            comparison = replace(comparison, in_sample=True)
        if (note := mismatch_note(comparison)) is not None:
            notes.append(note)
        if scaling is None or scaling.method != PREDICTED_METHOD:
            scaling = time_scaling(workload.precision, workload, correction=correction)
            notes.append(f"{TIME_NOTE}the measured step time scaled by the time predictor's ratios "
                         f"for {workload.model}")
    except (GpuwiseError, TypeError, ValueError) as exc:
        notes.append(f"no prediction for the run's workload: {str(exc)[:200]}")
        return None, scaling or recorded_precision_scaling(measured, notes)
    return comparison, scaling


def recorded_workload(record: Mapping[str, object], precision: str | None = None) -> Workload:
    """The workload a run log records, at ``precision`` where the user named one (``--precision``): the user's
    own wins over the record's (docs/report.md, as in ``advise``), and is not swapped for a GPU's fp16 twin
    (``precision_default`` False). WorkloadError when the record does not read."""
    workload = Workload.from_dict(record)
    return workload if precision is None else workload.with_(precision=precision, precision_default=False)


def gpu_used_bytes(usage: UsageSummary | None) -> int | None:
    """The job's peak memory as "Memory needed" reports it when that is the GPU's used memory (no per-process
    figure: a container, an nvidia-smi CSV); None when the log has the job's process memory or no samples. Both
    inputs set the same figure beside the prediction."""
    if usage is None or not usage.job_devices or usage.job_devices[0].memory_basis != "used":
        return None
    return usage.needed_peak_bytes


def recorded_precision_scaling(measured: Measurement, notes: list[str]) -> TimeScaling | None:
    """The datasheet ratio at the precision the log's workload records (a note says so); None when it records
    none gpuwise knows (the caller's default then: an unknown job's precision)."""
    recorded = measured.workload.get("precision") if isinstance(measured.workload, Mapping) else None
    if not isinstance(recorded, str):
        return None
    try:
        precision = check_precision(recorded)
    except GpuwiseError:
        return None
    notes.append(f"{TIME_NOTE}the datasheet ratio at {precision}, the precision the run log's workload "
                 "records (its model is not traced on the log's word; --model SPEC uses the time predictor)")
    return time_scaling(precision)


# A job whose measured memory is this far from the prediction is most likely not the job the prediction is of.
MISMATCH_FACTOR = 1.5


def mismatch_note(c: PredictedVsMeasured) -> str | None:
    """A note when the GPU memory the log measured is more than ``MISMATCH_FACTOR`` away from what gpuwise
    predicts for the workload (either way): the workload given is probably not the job that ran."""
    total = next((f for f in c.figures if f.name == "nvidia-smi total"), None)
    if total is None or not total.measured or not total.predicted:
        return None
    ratio = total.predicted / total.measured
    if 1 / MISMATCH_FACTOR <= ratio <= MISMATCH_FACTOR:
        return None
    return (f"the log's peak ({format_bytes(int(total.measured))}) is far from what {c.workload.get('model')} with "
            f"these options needs ({format_bytes(int(total.predicted))} predicted): check that --model and its "
            "options describe the job that ran")


def comparison_title(c: PredictedVsMeasured) -> str:
    basis = c.calibration or "shipped model, no calibration of yours"
    return f"Predicted vs measured on {c.gpu} ({basis}):"


def comparison_rows(c: PredictedVsMeasured) -> list[tuple[str, str, str, str]]:
    """(figure, predicted, measured, error) in words, one per figure: the terminal lays them out as a table's
    columns, the HTML report as lines."""
    def fmt(f: Figure, x: float | None) -> str:
        if x is None:
            return "-"
        return format_duration(x) if f.unit == "s" else format_bytes(int(x))

    rows = []
    for f in c.figures:
        e = f.signed_error
        err = f"{e:+.1%}" if e is not None else "not measured" if f.measured is None else "-"
        if e is not None and c.in_sample and f.name == "step time":
            err += ", in-sample"
        rows.append((f.label, fmt(f, f.predicted), fmt(f, f.measured), err))
    return rows


IN_SAMPLE_LINE = ("in-sample: this run is one of your calibration's, so the step time error says how closely the fit "
                  "reproduces it, not how well gpuwise predicts (--no-user-calibration: the shipped model's error)")


def comparison_footer(c: PredictedVsMeasured) -> list[str]:
    """Why a figure was not measured, whether the error is in-sample (the calibration was fitted on this run), and
    where the measured step time falls in the shipped model's likely range, with what to do with the run."""
    lines = [f"{f.label} not measured: {f.unmeasured_why}" for f in c.figures
             if f.measured is None and f.unmeasured_why]
    if c.in_sample:
        lines.append(IN_SAMPLE_LINE)
    step = next((f for f in c.figures if f.name == "step time"), None)
    likely = c.likely_step_time_range_s()
    if not (likely and step is not None and step.measured):
        return lines
    lo, hi = likely
    where = "within" if lo <= step.measured <= hi else "outside"
    return lines + [
        f"measured time {where} the likely {format_duration(lo)} to {format_duration(hi)} (8 in 10 held-out runs);",
        "gpuwise calibrate LOG makes later predictions start from this run"]


def comparison_lines(c: PredictedVsMeasured) -> list[str]:
    """The comparison in words: the title, one line per figure, the footer (the HTML report's facts)."""
    lines = [comparison_title(c)]
    lines += [f"  {name}: predicted {p}, measured {m}, error {err}" for name, p, m, err in comparison_rows(c)]
    lines += [f"  {line}" for line in comparison_footer(c)]
    return lines
