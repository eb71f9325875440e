"""``benchmarks/gpu/measure.py``'s JSON as measurements: a lent GPU calibrates the shipped model through
the same path as a user's runs calibrate theirs."""

from __future__ import annotations

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.errors import GpuwiseError
from gpuwise.report.measured import Measurement
from gpuwise.workload import Workload


def is_measure_json(doc: object) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("gpu"), dict) and isinstance(doc.get("results"), list)


def measurements_from_measure_json(doc: dict, source: str) -> list[Measurement]:
    """One measurement per workload measured "ok"; CalibrateError for a dry run (it measured the CPU)."""
    info = doc["gpu"]
    if info.get("dry_run"):
        raise CalibrateError(f"{source}: a --dry-run of measure.py measured this CPU, not a GPU")
    out = []
    for row in doc["results"]:
        if not isinstance(row, dict) or row.get("status") != "ok" or row.get("dry_run"):
            continue
        where = f"{source} [{row.get('id', '?')}]"
        try:
            workload = Workload.from_dict(row["workload"]).to_dict()
        except (GpuwiseError, KeyError, TypeError) as exc:
            raise CalibrateError(f"{where}: unreadable workload ({str(exc)[:150]})") from None
        out.append(Measurement(
            gpu_name=info.get("nvml_name") or info.get("name"), workload=workload,
            step_time_s=row.get("median_step_time_s"), timed_steps=len(row.get("step_times_s") or []),
            peak_allocated_bytes=row.get("max_memory_allocated_bytes"),
            peak_reserved_bytes=row.get("max_memory_reserved_bytes"),
            process_memory_bytes=row.get("nvml_process_bytes"), driver_version=info.get("driver"),
            cuda_version=info.get("cuda"), torch_version=info.get("torch"), source=where))
    return out

