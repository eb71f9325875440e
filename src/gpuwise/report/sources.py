"""Reads any log the report understands into one ``UsageLog``: a gpuwise run log (SQLite), an
``nvidia-smi --query-gpu ... --format=csv`` log, or an ``nvidia-smi dmon`` log.

Every sample is checked against its physical range (``sample_problem``) whatever the source (a run log's in one
pass of SQLite over its rows, ``bad_row_message``; the rows checked are the rows read, however many a run still
being written appends meanwhile), and text
from the file (GPU names, meta, event messages) loses control characters before it can reach a terminal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from gpuwise.monitor.sample import GpuSample
from gpuwise.monitor.sample_checks import bad_row_message
from gpuwise.report.dmon import looks_like_dmon, parse_dmon
from gpuwise.report.errors import ReportError
from gpuwise.report.sample_table import read_sample_table
from gpuwise.report.smi_csv import parse_smi_csv
from gpuwise.runlog import (COMMAND_KEY, END_T_S_KEY, EXIT_CODE_KEY, START_T_S_KEY, TORCH_MEMORY_EVENT, RunLogError,
                            is_run_log, last_gpu_sample_rowid, read_events, read_meta)
from gpuwise.text import printable, printable_or_none


RUN_LOG_SOURCE = "gpuwise run log"


@dataclass(frozen=True)
class TorchPeak:
    """What PyTorch's caching allocator saw in one process on one device (the ``--torch-hook``)."""

    pid: int
    device: int
    max_allocated_bytes: int   # torch.cuda.max_memory_allocated: what tensors needed
    max_reserved_bytes: int    # torch.cuda.max_memory_reserved: what the allocator held (incl. cache)


@dataclass(frozen=True)
class UsageLog:
    path: str
    source: str                       # "gpuwise run log", "nvidia-smi csv", "nvidia-smi dmon"
    samples: Sequence[GpuSample]      # a tuple; a run log's: a SampleTable (columns, its samples made on demand)
    meta: Mapping[str, str] = field(default_factory=dict)
    events: tuple[Mapping[str, object], ...] = ()
    torch_peaks: tuple[TorchPeak, ...] = ()
    notes: tuple[str, ...] = ()


def load_usage_log(path: str | Path, *, columns: list[str] | None = None) -> UsageLog:
    p = Path(path)
    if p.is_dir():
        raise ReportError(f"{p} is a directory: give the log file (a gpuwise run log, an nvidia-smi CSV or dmon "
                          "log; a TensorBoard or loss log goes to `gpuwise advise`)")
    if not p.is_file():
        raise ReportError(f"no such log: {p}")
    try:
        empty = p.stat().st_size == 0
    except OSError as exc:
        raise ReportError(f"{p}: cannot read the log ({exc.strerror or exc})") from None
    if empty:
        raise ReportError(f"{p} is empty (0 bytes): no samples to report (a run that failed before it started, "
                          "or a log still being created?)")
    if is_run_log(p):
        return _load_run_log(p)
    try:
        text = p.read_text(encoding="utf-8", errors="strict")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{p}: not a text log nor a gpuwise run log ({exc})") from None
    if looks_like_dmon(text):
        samples, notes = parse_dmon(text, str(p))
        return UsageLog(str(p), "nvidia-smi dmon", tuple(samples), notes=tuple(notes))
    samples, notes = parse_smi_csv(text, str(p), columns)
    return UsageLog(str(p), "nvidia-smi csv", tuple(samples), notes=tuple(notes))


def _load_run_log(p: Path) -> UsageLog:
    try:
        last_rowid = last_gpu_sample_rowid(p)
        bad = bad_row_message(p, up_to_rowid=last_rowid)
        if bad:
            raise ReportError(bad)
        table = read_sample_table(p, up_to_rowid=last_rowid)
        meta = read_meta(p)
        events = read_events(p)
    except RunLogError as exc:
        raise ReportError(str(exc)) from None
    peaks = []
    for e in events:
        if e["kind"] != TORCH_MEMORY_EVENT:
            continue
        try:
            data = json.loads(e["message"])
            for dev in data["devices"]:
                peaks.append(TorchPeak(int(data["pid"]), int(dev["device"]), int(dev["max_allocated_bytes"]),
                                       int(dev["max_reserved_bytes"])))
        except (ValueError, KeyError, TypeError):
            continue  # a hook from another version: the samples still tell the story
    notes = () if len(table) else (f"{p}: no GPU samples in this run log (no NVIDIA driver while it ran?)",)
    meta = {printable(str(k)): printable_or_none(v) for k, v in meta.items()}
    events = [{k: printable(v) if isinstance(v, str) else v for k, v in e.items()} for e in events]
    return UsageLog(str(p), RUN_LOG_SOURCE, table, meta, tuple(events), tuple(peaks), notes)


def log_ended(log: UsageLog) -> bool | None:
    """Whether a gpuwise run log records its end (``end_t_s``, and ``exit_code`` where it records a command:
    a ``gpuwise run``); None for the other logs and for a run log without its start meta, which record no end. A run log without its end was
    written by a gpuwise killed outright (SIGKILL, the OOM killer, a lost machine) or still running."""
    if log.source != RUN_LOG_SOURCE or not log.meta.get(START_T_S_KEY):
        return None       # a log without its start meta (the library's Sampler, an older log) says nothing of its end
    if not log.meta.get(END_T_S_KEY):
        return False
    return COMMAND_KEY not in log.meta or log.meta.get(EXIT_CODE_KEY) not in (None, "")
