"""The whole report: read a log, summarise usage, right-size against the catalog. Pure but for reading."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuwise.catalog import GPU, Catalog, resolve_gpu
from gpuwise.monitor.sample import GpuSample
from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION
from gpuwise.plan.scaling import TimeScaling
from gpuwise.report.errors import ReportError
from gpuwise.report.predicted_vs_measured import PredictedVsMeasured, measured_against_prediction
from gpuwise.report.rightsize import TIME_NOTE, RightSizing, resolve_rented, right_size
from gpuwise.report.sources import load_usage_log
from gpuwise.report.usage import UsageSummary, summarize
from gpuwise.runlog import RunLogError, read_train_metrics
from gpuwise.workload import Workload


@dataclass(frozen=True)
class Report:
    usage: UsageSummary
    right_sizing: RightSizing | None
    notes: tuple[str, ...]
    samples: tuple[GpuSample, ...] = ()   # the log's samples, for plots (not in to_dict)
    predicted_vs_measured: PredictedVsMeasured | None = None   # when the log records its workload

    def to_dict(self) -> dict:
        u, r = self.usage, self.right_sizing
        job = u.job_devices
        return {
            "log": u.path,
            "source": u.source,
            "duration_s": u.duration_s,
            "gpu_name": u.gpu_name,
            "gpu_count": len(job),
            "needed_peak_bytes": u.needed_peak_bytes,
            "needed_p95_bytes": u.needed_p95_bytes,
            "memory_basis": job[0].memory_basis if job else None,
            "busy_share": u.busy_share,
            "cheaper": [o.gpu_id for o in r.cheaper] if r else [],
            "usage": u.to_dict(),
            "right_sizing": r.to_dict() if r else None,
            "notes": list(self.notes),
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
) -> Report:
    """``gpu``: the rented GPU when the log does not name it (dmon) or names it wrongly; raises CatalogError.
    ``scaling`` None: the time predictor's ratios when the log records its workload, else the datasheet ratio.
    ``workload``: the job (``--model …``), compared with what a gpuwise run log measured (``predicted_vs_measured``).
    ``correction``: the user's calibration for the predictions (``plan.profile.model_for``); None: the shipped model."""
    log = load_usage_log(path, columns=columns)
    if not log.samples:
        why = ("no NVIDIA driver or GPU was found while the job ran" if log.source == "gpuwise run log"
               else "was nvidia-smi logging while the job ran?")
        steps = _train_steps(path) if log.source == "gpuwise run log" else 0
        if steps:  # e.g. a gpuwise.guard run log: its training metrics are `advise`'s input
            raise ReportError(f"{path}: the {log.source} has no GPU samples ({why}) but holds training metrics "
                              f"of {steps} step(s): `gpuwise advise {path}` reads them")
        raise ReportError(f"{path}: the {log.source} has no GPU samples ({why}): nothing to report")
    usage = summarize(log)
    notes = list(usage.notes)
    rented: GPU | None
    if gpu:
        rented = resolve_gpu(catalog, gpu)
    else:
        rented, note = resolve_rented(catalog, usage.gpu_name)
        if note:
            notes.append(note)
    comparison, scaling = measured_against_prediction(log, rented, scaling, notes, workload, correction)
    sizing = None
    if usage.needed_peak_bytes is not None:
        sizing = right_size(usage, catalog, rented, gpu_price=gpu_price, provider=provider, spot=spot,
                            currency=currency, headroom_fraction=headroom_fraction, scaling=scaling)
        said = any(n.startswith(TIME_NOTE) for n in notes)      # e.g. the log's recorded precision: say it once
        notes.extend(n for n in sizing.notes if not (said and n.startswith(TIME_NOTE)))
    return Report(usage, sizing, tuple(notes), log.samples, comparison)


def _train_steps(path: str | Path) -> int:
    """Steps with training metrics in a gpuwise run log (0 when it holds none or cannot be read)."""
    try:
        return len({step for series in read_train_metrics(path).values() for step, _, _ in series})
    except RunLogError:
        return 0


__all__ = ["Report", "build_report"]
