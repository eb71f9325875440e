"""``benchmarks/gpu/measure.py``'s JSON as measurements: a lent GPU calibrates the shipped model through
the same path as a user's runs calibrate theirs.

A workload's row is held to a run log's rules, said in the JSON's own terms: its GPU named (``gpu``'s ``nvml_name``
or ``name``), and at least ``MIN_TIMED_STEPS`` timed steps, each a step time (``ranges.step_time_s``). measure.py
times its steps after its own ``--warmup`` ones, so all of ``step_times_s`` counts, where a run log's first
``WARMUP_STEPS`` do not."""

from __future__ import annotations

import logging

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.export import checked_figures
from gpuwise.calibrate.own_memory import OWN, MatchedMeasurement
from gpuwise.calibrate.ranges import step_time_s
from gpuwise.errors import GpuwiseError
from gpuwise.report.measured import MIN_TIMED_STEPS, Measurement
from gpuwise.text import clipped
from gpuwise.workload import Workload

# a measurement's figure (``export.FIGURES``) -> the key measure.py writes it under
MEASURE_KEYS = {"step_time_s": "median_step_time_s", "timed_steps": "step_times_s",
                "peak_allocated_bytes": "max_memory_allocated_bytes", "peak_reserved_bytes": "max_memory_reserved_bytes",
                "process_memory_bytes": "nvml_process_bytes"}
LISTED_CHARS = 300       # the workloads left out, as said in one line: clipped to this


def is_measure_json(doc: object) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("gpu"), dict) and isinstance(doc.get("results"), list)


def unmeasured(row: object) -> str | None:
    """Why measure.py measured no step of ``row`` ("big (oom)", "late (skipped: time budget spent)", "r18 (a dry
    run)"); None for a row it measured ("ok")."""
    if not isinstance(row, dict):
        return str(row)[:40]
    if row.get("dry_run"):
        return f"{row.get('id', '?')} (a dry run)"
    if row.get("status") != "ok":
        return f"{row.get('id', '?')} ({row.get('status', 'no status')})"
    return None


def measured_gpu_name(info: dict, source: str) -> str:
    """The GPU measure.py ran on, as the driver names it (``nvml_name``, else torch's ``name``); CalibrateError
    when ``gpu`` names none."""
    name = info.get("nvml_name") or info.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CalibrateError(f"{source}: its \"gpu\" names no GPU (no nvml_name nor name, which measure.py writes): "
                             "nothing to calibrate")
    return name


def measurements_from_measure_json(doc: dict, source: str) -> list[Measurement]:
    """One measurement per workload measured "ok" (the others warned about, one line: an OOM, an error or a spent time
    budget measured no step); CalibrateError for a dry run (it measured the CPU), a GPU it does not name, or no
    workload measured (naming each one's status)."""
    info = doc["gpu"]
    if info.get("dry_run"):
        raise CalibrateError(f"{source}: a --dry-run of measure.py measured this CPU, not a GPU")
    gpu_name = measured_gpu_name(info, source)
    skipped = [why for why in map(unmeasured, doc["results"]) if why is not None]
    if len(skipped) == len(doc["results"]):
        said = ", ".join(skipped) or "its results list none"
        raise CalibrateError(f"{source}: measure.py measured no workload: {clipped(said, LISTED_CHARS)}")
    out = []
    for row in doc["results"]:
        if unmeasured(row) is not None:
            continue
        where = f"{source} [{row.get('id', '?')}]"
        try:
            workload = Workload.from_dict(row["workload"]).to_dict()
        except (GpuwiseError, KeyError, TypeError) as exc:
            raise CalibrateError(f"{where}: unreadable workload ({str(exc)[:150]})") from None
        out.append(MatchedMeasurement(
            gpu_name=gpu_name, workload=workload, **row_figures(row, where),
            driver_version=info.get("driver"), cuda_version=info.get("cuda"), torch_version=info.get("torch"),
            source=where, process_match=OWN))     # measure.py reads its own pid's memory (nvml_process_bytes)
    if skipped:
        logging.getLogger(__name__).warning("%s: %d of its %d workloads not measured, left out: %s", source,
                                            len(skipped), len(doc["results"]),
                                            clipped(", ".join(skipped), LISTED_CHARS))
    return out


def row_figures(row: dict, where: str) -> dict:
    """A measure.py row's figures under ``Measurement``'s names, checked as an exported row's are
    (``export.checked_figures``), its step times as a run log's are (``timed_steps``); CalibrateError naming
    ``where`` and the figure out of its range."""
    figures = {name: row.get(key) for name, key in MEASURE_KEYS.items() if name != "timed_steps"}
    try:
        return checked_figures({**figures, "timed_steps": timed_steps(row)}, said=MEASURE_KEYS)
    except ValueError as exc:
        raise CalibrateError(f"{where}: {exc}") from None


def timed_steps(row: dict) -> int:
    """How many steps a measure.py row timed (``step_times_s``), each a step time and at least ``MIN_TIMED_STEPS``
    (a run log's rule for a step time), its median written (``median_step_time_s``); ValueError naming the key
    otherwise."""
    key = MEASURE_KEYS["timed_steps"]
    times = row.get(key) or []
    if not isinstance(times, list):
        raise ValueError(f"{key} {str(times)[:40]!r} is not a list of step times")
    for i, t in enumerate(times):
        step_time_s(t, f"{key}[{i}]")
    if len(times) < MIN_TIMED_STEPS:
        raise ValueError(f"{key} holds {len(times)} timed step{'s' if len(times) != 1 else ''}, fewer than the "
                         f"{MIN_TIMED_STEPS} a step time needs: rerun measure.py with --steps {MIN_TIMED_STEPS} "
                         "or more")
    if row.get(MEASURE_KEYS["step_time_s"]) is None:
        raise ValueError(f"no {MEASURE_KEYS['step_time_s']} beside its {len(times)} {key} (measure.py writes both)")
    return len(times)
