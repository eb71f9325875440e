"""``benchmarks/gpu/measure.py``'s JSON as measurements: a lent GPU calibrates the shipped model through
the same path as a user's runs calibrate theirs."""

from __future__ import annotations

import logging

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.export import checked_figures
from gpuwise.errors import GpuwiseError
from gpuwise.report.measured import Measurement
from gpuwise.workload import Workload

# a measurement's figure (``export.FIGURES``) -> the key measure.py writes it under
MEASURE_KEYS = {"step_time_s": "median_step_time_s", "timed_steps": "step_times_s",
                "peak_allocated_bytes": "max_memory_allocated_bytes", "peak_reserved_bytes": "max_memory_reserved_bytes",
                "process_memory_bytes": "nvml_process_bytes"}


def is_measure_json(doc: object) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("gpu"), dict) and isinstance(doc.get("results"), list)


def measurements_from_measure_json(doc: dict, source: str) -> list[Measurement]:
    """One measurement per workload measured "ok" (the others warned about, one line: an OOM, an error or a spent time
    budget measured no step); CalibrateError for a dry run (it measured the CPU)."""
    info = doc["gpu"]
    if info.get("dry_run"):
        raise CalibrateError(f"{source}: a --dry-run of measure.py measured this CPU, not a GPU")
    out, skipped = [], []
    for row in doc["results"]:
        if not isinstance(row, dict) or row.get("status") != "ok" or row.get("dry_run"):
            skipped.append(f"{row.get('id', '?')} ({'a dry run' if row.get('dry_run') else row.get('status', 'no status')})"
                           if isinstance(row, dict) else str(row)[:40])
            continue
        where = f"{source} [{row.get('id', '?')}]"
        try:
            workload = Workload.from_dict(row["workload"]).to_dict()
        except (GpuwiseError, KeyError, TypeError) as exc:
            raise CalibrateError(f"{where}: unreadable workload ({str(exc)[:150]})") from None
        out.append(Measurement(
            gpu_name=info.get("nvml_name") or info.get("name"), workload=workload, **row_figures(row, where),
            driver_version=info.get("driver"), cuda_version=info.get("cuda"), torch_version=info.get("torch"),
            source=where))
    if skipped and out:
        logging.getLogger(__name__).warning("%s: %d of its %d workloads not measured, left out: %s", source,
                                            len(skipped), len(doc["results"]), ", ".join(skipped))
    return out


def row_figures(row: dict, where: str) -> dict:
    """A measure.py row's figures under ``Measurement``'s names, checked as an exported row's are
    (``export.checked_figures``); CalibrateError naming ``where`` and the figure out of its range."""
    times = row.get("step_times_s") or []
    if not isinstance(times, list):
        raise CalibrateError(f"{where}: step_times_s {str(times)[:40]!r} is not a list of step times")
    figures = {name: row.get(key) for name, key in MEASURE_KEYS.items() if key != "step_times_s"}
    try:
        return checked_figures({**figures, "timed_steps": len(times)}, said=MEASURE_KEYS)
    except ValueError as exc:
        raise CalibrateError(f"{where}: {exc}") from None
