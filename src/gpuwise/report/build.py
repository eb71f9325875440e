"""The whole report: read a log, summarise usage, right-size against the catalog. Pure but for reading."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import GpuwiseError
from gpuwise.monitor.sample import GpuSample
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION
from gpuwise.plan.money import parse_price
from gpuwise.plan.offers import check_provider
from gpuwise.plan.scaling import TimeScaling, time_scaling
from gpuwise.report.errors import ReportError
from gpuwise.report.measured import Measurement
from gpuwise.report.predicted_vs_measured import PredictedVsMeasured, measured_against_prediction
from gpuwise.report.rightsize import TIME_NOTE, RightSizing, rented_gpu, resolve_rented, right_size
from gpuwise.report.run_end import RunEnd, run_end
from gpuwise.report.smi_csv import check_columns
from gpuwise.report.sources import load_usage_log, log_ended
from gpuwise.report.usage import UsageSummary, summarize
from gpuwise.runlog import EXIT_CODE_KEY, START_ERROR_KEY, RunLogError, read_train_metrics
from gpuwise.units import UnitError, format_bytes
from gpuwise.workload import Workload

Money = tuple[float, "str | None"]


@dataclass(frozen=True)
class Report:
    """What ``build_report`` says of one log: what the job used (``usage``: peak memory, utilisation, per GPU
    and per process), which cheaper catalog GPU would have held it and what that saves (``right_sizing``; None
    without a GPU to compare against), the prediction against the measurement where the log records its
    workload (``predicted_vs_measured``), how a gpuwise run log's job ended (``run_end``: exit code, signal, last
    logged step), and ``notes``/``warnings`` in words. ``to_dict()`` is the
    `gpuwise report --json` object."""

    usage: UsageSummary
    right_sizing: RightSizing | None
    notes: tuple[str, ...]
    samples: Sequence[GpuSample] = ()     # the log's samples (a SampleTable for a run log), for plots (not in to_dict)
    predicted_vs_measured: PredictedVsMeasured | None = None   # when the log records its workload
    warnings: tuple[str, ...] = ()        # what makes the figures doubtful (a --gpu the job cannot have run on)
    compared_as: str | None = None        # the GPU --gpu named, when it is not the one the log names
    run_ended: bool | None = None         # a gpuwise run log: whether it records its end (None: another log)
    run_end: RunEnd | None = None         # a gpuwise run log: how its job ended (exit code, signal, last step)

    def to_dict(self) -> dict:
        u, r = self.usage, self.right_sizing
        job = u.job_devices
        return {
            "log": u.path,
            "source": u.source,
            "duration_s": u.duration_s,
            "gpu_name": u.gpu_name,
            "gpu_kinds": [k.to_dict() for k in u.gpu_kinds],
            "compared_as": self.compared_as,
            "gpu_count": len(u.job_gpus),        # physical GPUs: a GPU's MIG instances are that one GPU
            "device_count": len(job),            # the job's devices: each MIG instance one
            "run_ended": self.run_ended,
            "exit_code": self.run_end.exit_code if self.run_end else None,
            "signal": self.run_end.signal if self.run_end else None,
            "stop_signal": self.run_end.stop_signal if self.run_end else None,
            "ended": self.run_end.ended if self.run_end else None,
            "last_logged_step": self.run_end.last_step if self.run_end else None,
            "needed_peak_bytes": u.needed_peak_bytes,
            "needed_p95_bytes": u.needed_p95_bytes,
            "memory_basis": job[0].memory_basis if job else None,
            "busy_share": u.busy_share,
            "cheaper": [o.gpu_id for o in r.cheaper] if r else [],
            "usage": u.to_dict(),
            "right_sizing": r.to_dict() if r else None,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "predicted_vs_measured": self.predicted_vs_measured.to_dict() if self.predicted_vs_measured else None,
        }


def build_report(
    path: str | Path,
    catalog: Catalog,
    *,
    gpu: str | None = None,
    gpu_price: tuple[float, str | None] | None = None,
    provider: str | None = None,
    spot: bool = False,
    currency: str | None = None,
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION,
    columns: list[str] | None = None,
    scaling: TimeScaling | None = None,
    workload: Workload | None = None,
    correction=None,
    is_calibration_run: Callable[[Measurement, str], bool] | None = None,
    precision: str | None = None,
) -> Report:
    """``gpu``: the rented GPU when the log does not name it (dmon) or names it wrongly; raises CatalogError.
    ``scaling`` None: the time predictor's ratios when the log records its workload, else the datasheet ratio.
    ``workload``: the job (``--model …``), compared with what a gpuwise run log measured (``predicted_vs_measured``).
    ``correction``: the user's calibration for the predictions (``plan.profile.model_for``); None: the shipped model.
    ``is_calibration_run(measurement, gpu_id)``: whether that calibration was fitted on this run (the comparison
    then says its error is in-sample); the CLI reads it from the calibration file. ``precision``: the job's
    precision the user named (``--precision`` without ``--model``): the datasheet ratio's, and it replaces the
    one the log's workload records (``predicted_vs_measured.recorded_workload``)."""
    if columns:
        check_columns(columns)      # a typo in --columns: refused whatever the log (one line, exit 2)
    log = load_usage_log(path, columns=columns)
    if not log.samples:
        if log.meta.get(START_ERROR_KEY):     # gpuwise run's command never started (runner.py)
            raise ReportError(f"{path}: the command never started ({log.meta[START_ERROR_KEY]}; exit code "
                              f"{log.meta.get(EXIT_CODE_KEY, '?')}): nothing to report")
        why = ("no NVIDIA driver or GPU was found while the job ran" if log.source == "gpuwise run log"
               else "was nvidia-smi logging while the job ran?")
        steps = _train_steps(path) if log.source == "gpuwise run log" else 0
        if steps:  # e.g. a gpuwise.guard run log: its training metrics are `advise`'s input
            raise ReportError(f"{path}: the {log.source} has no GPU samples ({why}) but holds training metrics "
                              f"of {steps} step(s): `gpuwise advise {path}` reads them")
        raise ReportError(f"{path}: the {log.source} has no GPU samples ({why}): nothing to report")
    usage = summarize(log)
    notes = list(usage.notes)
    warnings: list[str] = []
    ended = log_ended(log)
    if ended is False:
        notes.append(UNENDED_NOTE)
    rented: GPU | None
    compared_as = None
    if usage.mixed_gpus and not gpu:
        logged, logged_note = None, None
    else:
        logged, logged_note = resolve_rented(catalog, usage.gpu_name)
    if gpu:
        rented, slice_note = rented_gpu(catalog, gpu)
        if logged is None or logged.id != rented.id:
            compared_as = rented.name
        if slice_note:
            notes.append(slice_note)
    else:
        rented = logged
        if logged_note:
            notes.append(logged_note)
    if rented is not None and usage.needed_peak_bytes is not None and usage.needed_peak_bytes > rented.visible_memory_bytes:
        named = f"{rented.name} (--gpu {gpu})" if gpu else rented.name
        warnings.append(f"the job's measured peak, {format_bytes(usage.needed_peak_bytes)}, is more than the "
                        f"{format_bytes(rented.visible_memory_bytes)} of {named}: the job cannot have run on it"
                        + ("; check --gpu" if gpu else ""))
    if scaling is None and precision is not None:
        scaling = time_scaling(precision)    # the datasheet ratio there, unless the log's workload is traced
    comparison, scaling = measured_against_prediction(log, usage, rented, scaling, notes, workload, correction,
                                                      is_calibration_run, precision)
    sizing = None
    if usage.nothing_ran:
        pass        # no verdict on GPUs nothing ran on: summarize's note says so
    elif usage.mixed_gpus and not gpu:
        notes.append(mixed_gpus_note(usage))
    elif usage.needed_peak_bytes is not None:
        sizing = right_size(usage, catalog, rented, gpu_price=gpu_price, provider=provider, spot=spot,
                            currency=currency, headroom_fraction=headroom_fraction, scaling=scaling)
        said = any(n.startswith(TIME_NOTE) for n in notes)      # e.g. the log's recorded precision: say it once
        notes.extend(n for n in sizing.notes if not (said and n.startswith(TIME_NOTE)))
    else:
        notes.append(NO_MEMORY_NOTE)
    return Report(usage, sizing, tuple(notes), log.samples, comparison, tuple(warnings), compared_as, ended,
                  run_end(log))


def mixed_gpus_note(usage: UsageSummary) -> str:
    """Why a job on GPUs of different kinds gets no cheaper-GPU comparison."""
    n = len(usage.job_gpus)
    return (f"the job's GPUs differ in kind ({usage.gpu_kinds_words}): no cheaper-GPU comparison, since it "
            f"prices the run as {n} GPUs of one kind; --gpu NAME compares them as {n} × that GPU")


UNENDED_NOTE = ("the run log records no end (no exit code, no end time): the run was killed (SIGKILL, a lost "
                "machine) or is still running; the figures cover only what was logged until then")
NO_MEMORY_NOTE = ("the log records no memory use (no memory used nor process memory in any sample): no cheaper GPU "
                  "can be judged, so there is no right-sizing")


def price_options(catalog: Catalog | None, *, gpu_price: str | None = None, provider: str | None = None,
                  currency: str | None = None) -> tuple[Money | None, str | None]:
    """``--gpu-price`` as (amount, currency) and ``--provider`` as the catalog spells it, each checked
    (``plan.money.parse_price``, a provider of ``catalog``): ReportError/PlanError (exit 2, one line naming the
    option) otherwise. ``report`` and ``run`` call it before any work (run: before its command starts).
    ``catalog`` None: the provider is not checked (and not given). ``currency``: ``--currency``, which costs are
    ranked in (JPY: a ¥ price is refused as yuan or yen, the one money rule)."""
    money = None
    if gpu_price is not None:
        try:
            money = parse_price(gpu_price, ranking_currency=currency)
        except (UnitError, GpuwiseError) as exc:
            raise ReportError(f"--gpu-price: {exc}") from None
    if provider is not None and catalog is not None:
        provider = check_provider(catalog, provider)
    return money, provider


def _train_steps(path: str | Path) -> int:
    """Steps with training metrics in a gpuwise run log (0 when it holds none or cannot be read)."""
    try:
        return len({step for series in read_train_metrics(path).values() for step, _, _ in series})
    except RunLogError:
        return 0


__all__ = ["Report", "build_report", "price_options"]
