"""Physical ranges of a ``GpuSample``: what a reader accepts from a log it did not write.

A log edited by hand, cut by a full disk or written by another tool can hold 500 % utilisation, negative
memory, more memory used than the GPU has, or text where a number belongs; each would turn into
nonsense costs downstream. Readers call :func:`sample_problem` on every sample and name the row.

A run log of a day on 8 GPUs holds 691,200 rows: its readers let SQLite pick out, in C, the rows these checks
might refuse (:func:`suspect_row_sql`, a superset of them) and judge only those with :func:`row_problem`, which
keeps one rule and one wording: :func:`first_bad_row` does both, and :func:`bad_row_message` names the row as
report and advise refuse it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

from gpuwise.monitor.sample import GpuSample, sample_from_row
from gpuwise.runlog import read_gpu_samples_where
from gpuwise.units import format_bytes

MAX_GPU_MEMORY_BYTES = 2**44      # 16 TiB: far above any GPU (B300: 288 GB), far below a typo's 1e20
MAX_POWER_W = 10_000.0            # a GB200 superchip draws ~2.7 kW
_PERCENT = ("utilization_pct", "memory_util_pct", "sm_activity_pct", "sm_occupancy_pct")
_BYTES = ("memory_used_bytes", "memory_total_bytes", "process_memory_bytes", "memory_reserved_bytes")
_WITHIN_TOTAL = ("memory_used_bytes", "process_memory_bytes")   # at most memory_total_bytes
_NON_NEGATIVE = ("sm_clock_mhz", "mem_clock_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
_TEXT = ("uuid", "name", "process_match")
_INTS = ("gpu_index", "mig_index", "process_count", "lost", "gpu_instance_id")
_NUMBERS = tuple(f.name for f in fields(GpuSample) if f.name not in _TEXT)
_FINITE_BOUND = 1e308             # SQL: a number beyond this may be infinite (SQLite stores NaN as NULL)


def _bytes(n: float) -> str:
    """Bytes in words that tell two small amounts apart (50 B, not 0.0 KiB)."""
    return f"{n:.0f} B" if n < 2**20 else format_bytes(n)


def sample_problem(s: GpuSample) -> str | None:
    """What is physically impossible about ``s`` (one phrase), or None when it is plausible."""
    for name in _NUMBERS:
        v = getattr(s, name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{name} is {str(v)[:40]!r}, not a number"
        if not math.isfinite(v):
            return f"{name} is {v}, not a finite number"
        if name in _INTS and (v != int(v) or v < 0):
            return f"{name} is {v}, not a whole number >= 0"
    for name in _TEXT:
        v = getattr(s, name)
        if v is not None and not isinstance(v, str):
            return f"{name} is {type(v).__name__}, not text"
    for name in _PERCENT:
        v = getattr(s, name)
        if v is not None and not 0 <= v <= 100:
            return f"{name} is {v:g} %, outside 0-100 %"
    for name in _BYTES:
        v = getattr(s, name)
        if v is not None and not 0 <= v <= MAX_GPU_MEMORY_BYTES:
            return f"{name} is {v:g} bytes, outside 0 B-{format_bytes(MAX_GPU_MEMORY_BYTES)}"
    total = s.memory_total_bytes
    if total is not None:
        for name in _WITHIN_TOTAL:
            v = getattr(s, name)
            if v is not None and v > total:
                return f"{name} {_bytes(v)} is more than memory_total_bytes {_bytes(total)}"
    if s.power_w is not None and not 0 <= s.power_w <= MAX_POWER_W:
        return f"power_w is {s.power_w:g} W, outside 0-{MAX_POWER_W:g} W"
    for name in _NON_NEGATIVE:
        v = getattr(s, name)
        if v is not None and v < 0:
            return f"{name} is {v:g}, negative"
    return None


def row_problem(row: Mapping[str, object]) -> str | None:
    """``sample_problem`` of a run-log row or JSON object (``sample_from_row``), a value it cannot take
    (``lost: "yes"``) said in one phrase too."""
    try:
        return sample_problem(sample_from_row(row))
    except (TypeError, ValueError) as exc:
        return str(exc)[:100]


def _sql_range(name: str) -> tuple[float, float]:
    """The range SQL lets through for field ``name`` (not a whole-number one: ``_column_sql``): its physical range,
    else any finite number."""
    if name in _PERCENT:
        return 0.0, 100.0
    if name in _BYTES:
        return 0.0, float(MAX_GPU_MEMORY_BYTES)
    if name == "power_w":
        return 0.0, MAX_POWER_W
    if name in _NON_NEGATIVE:
        return 0.0, _FINITE_BOUND
    return -_FINITE_BOUND, _FINITE_BOUND


def _column_sql(name: str) -> str:
    """The SQL test that picks a ``gpu_samples`` row for the value in column ``name``: one comparison of the
    column with its range, which also picks text and blobs in a number's column (SQLite sorts them after every
    number). A whole-number column's upper end is its value's INTEGER cast, which a REAL that is not whole (or is
    infinite) exceeds; a memory column's is the row's memory_total_bytes (MAX_GPU_MEMORY_BYTES without one, and
    the total's own test picks a total out of range)."""
    if name in _INTS:
        return f"{name} NOT BETWEEN 0 AND CAST({name} AS INTEGER)"
    if name in _WITHIN_TOTAL:
        return f"{name} NOT BETWEEN 0 AND coalesce(memory_total_bytes, {MAX_GPU_MEMORY_BYTES})"
    low, high = _sql_range(name)
    return f"{name} NOT BETWEEN {low!r} AND {high!r}"


def suspect_row_sql() -> str:
    """An SQL condition over a ``gpu_samples`` row (every ``GpuSample`` field a column, NULL where absent) that
    holds for every row ``row_problem`` refuses, and for few others: SQLite checks a long log in C, and only
    the rows it picks are judged (and worded) by ``row_problem``. A superset on purpose, kept cheap, as it runs
    on every row of a day's log: one comparison per column (``_column_sql``) and no SQL function (a ``typeof``
    per row cost a third of the pass); ``< ''`` picks a number in a text's column, ``>= x''`` a blob."""
    terms = [_column_sql(name) for name in _NUMBERS]
    terms += [f"{name} < '' OR {name} >= x''" for name in _TEXT]
    return " OR ".join(terms)


def first_bad_row(path: str | Path, *, up_to_rowid: int | None = None) -> tuple[dict, str] | None:
    """The first ``gpu_samples`` row of the run log at ``path`` (in ``SAMPLE_ORDER``; ``up_to_rowid``: among the
    rows written up to it) that ``row_problem`` refuses, with its place (``read_gpu_samples_where``) and the
    problem; None when every row is plausible. RunLogError where the log cannot be read."""
    for row in read_gpu_samples_where(path, suspect_row_sql(), up_to_rowid=up_to_rowid):
        problem = row_problem(row)
        if problem:
            return row, problem
    return None


def bad_row_message(path: str | Path, *, up_to_rowid: int | None = None) -> str | None:
    """The one line a reader refuses the run log at ``path`` with, naming its first bad row
    ('FILE: gpu_samples row N (gpu G, t_s T): PROBLEM', ``first_bad_row``), or None when there is none."""
    bad = first_bad_row(path, up_to_rowid=up_to_rowid)
    if bad is None:
        return None
    row, problem = bad
    return f"{path}: gpu_samples row {row['_row_no']} (gpu {row.get('gpu_index')!r}, t_s {row.get('t_s')!r}): {problem}"
