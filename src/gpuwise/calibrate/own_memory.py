"""Whose memory a measurement's process figure is: the job's own processes', or every process's on its GPU.

NVML's process memory is matched to the job by pid (``monitor.procs.attribute_memory``): "pid", the job's own
processes; "all", every compute process on the GPU (a container whose pid namespace differs from the host's: a
co-tenant's memory is in it); None, not said. Only "pid" makes the figure the job's own, the one a calibrated
estimate of that job may be floored at (``rows.own_peak_bytes``). A run log says it per sample (``process_match``),
an exported row once (``export``), and measure.py reads its own pid's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from gpuwise.report.measured import Measurement
from gpuwise.runlog import iter_gpu_sample_rows

OWN = "pid"                    # matched by the job's own pids
EVERY = "all"                  # every compute process on the GPU
MATCHES = (OWN, EVERY)


@dataclass(frozen=True)
class MatchedMeasurement(Measurement):
    """A measurement that says how its process memory was matched to the job (``MATCHES``; None: not said)."""

    process_match: str | None = None


def matched(m: Measurement, process_match: str | None) -> MatchedMeasurement:
    """``m`` with how its process memory was matched."""
    return MatchedMeasurement(**{f.name: getattr(m, f.name) for f in fields(Measurement)},
                              process_match=process_match)


def process_match(m: Measurement) -> str | None:
    """How ``m``'s process memory was matched to the job; None where it does not say (a plain ``Measurement``)."""
    return m.process_match if isinstance(m, MatchedMeasurement) else None


def own_process_memory_bytes(m: Measurement) -> int | None:
    """``m``'s process memory where it is the job's own (matched by pid), else None."""
    return m.process_memory_bytes if process_match(m) == OWN else None


def run_log_process_match(path: str | Path) -> str | None:
    """How a run log's process memory was matched: "pid" where every sample that holds some matched the job's pids,
    "all" where one counted every process on its GPU, None where no sample holds any or one did not say.
    RunLogError as ``runlog.iter_gpu_sample_rows``."""
    seen = set()
    for rows in iter_gpu_sample_rows(path, ("process_match", "process_memory_bytes")):
        seen.update(match for match, process_bytes in rows if process_bytes)
    if seen == {OWN}:
        return OWN
    return EVERY if EVERY in seen else None
