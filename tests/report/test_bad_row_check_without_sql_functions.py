"""The bad-row check of a run log (``suspect_row_sql``, which SQLite evaluates on each of a day's 691,200 rows)
called ``typeof`` five times a row and read the memory columns twice: a third of the report's time on a day's
log. It now makes one comparison per column and calls no SQL function. It must pick every row the old condition
picked that ``row_problem`` refuses (the old condition is kept here as the reference), and no row the old one
did not pick, over any values a hand-edited or foreign-written log can hold."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.monitor.sample_checks import MAX_GPU_MEMORY_BYTES, row_problem, suspect_row_sql
from gpuwise.runlog import GPU_SAMPLE_COLUMNS, GPU_SAMPLE_NAMES

GIB = 2**30
_PERCENT = ("utilization_pct", "memory_util_pct", "sm_activity_pct", "sm_occupancy_pct")
_BYTES = ("memory_used_bytes", "memory_total_bytes", "process_memory_bytes", "memory_reserved_bytes")
_NON_NEGATIVE = ("sm_clock_mhz", "mem_clock_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
_TEXT = ("uuid", "name", "process_match")
_INTS = ("gpu_index", "mig_index", "process_count", "lost", "gpu_instance_id")
_NUMBERS = tuple(n for n in GPU_SAMPLE_NAMES if n not in _TEXT)
_NOT_NULL = ("t_s", "gpu_index", "lost")


def _old_range(name: str) -> tuple[float, float]:
    if name in _PERCENT:
        return 0.0, 100.0
    if name in _BYTES:
        return 0.0, float(MAX_GPU_MEMORY_BYTES)
    if name == "power_w":
        return 0.0, 10_000.0
    if name in _NON_NEGATIVE or name in _INTS:
        return 0.0, 1e308
    return -1e308, 1e308


def old_suspect_row_sql() -> str:
    """The condition as it was before it was made cheaper: the reference."""
    terms = [f"{name} NOT BETWEEN {_old_range(name)[0]!r} AND {_old_range(name)[1]!r}" for name in _NUMBERS]
    terms += [f"typeof({name}) = 'real'" for name in _INTS]
    terms += [f"{name} < '' OR {name} >= x''" for name in _TEXT]
    terms += [f"{name} > memory_total_bytes" for name in ("memory_used_bytes", "process_memory_bytes")]
    return " OR ".join(terms)


def _plausible() -> dict:
    return {"t_s": 1000.0, "gpu_index": 0, "uuid": "GPU-0", "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 40.0,
            "memory_util_pct": 10.0, "memory_used_bytes": 2 * GIB, "memory_total_bytes": 40 * GIB,
            "process_memory_bytes": GIB, "power_w": 150.0, "temperature_c": 50.0, "sm_clock_mhz": 1400.0,
            "mem_clock_mhz": 1600.0, "pcie_tx_bytes_per_s": 1e6, "pcie_rx_bytes_per_s": 1e6, "sm_activity_pct": 30.0,
            "sm_occupancy_pct": 20.0, "lost": 0, "mig_index": None, "process_count": 1, "process_match": "pid",
            "gpu_instance_id": None, "memory_reserved_bytes": 0}


EDGES = [0, 1, -1, 100, 101, 10_000, 10_001, GIB, 40 * GIB, 41 * GIB, MAX_GPU_MEMORY_BYTES, MAX_GPU_MEMORY_BYTES + 1,
         2**63 - 1, -(2**63), 0.0, -0.0, 0.5, 1.5, -0.5, 100.0, 100.5, 2.0, 40.0 * GIB, 40.5 * GIB, 1e20, 1e308,
         1.7e308, float("inf"), float("-inf"), float("nan"), "", "busy", "5", "1.5", "-1", "inf", "1e400", "NaN",
         b"", b"\x00", b"5"]
VALUES = st.one_of(st.sampled_from(EDGES), st.none(), st.integers(-(2**63), 2**63 - 1),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4), st.binary(max_size=3))
ROWS = st.lists(st.dictionaries(st.sampled_from(GPU_SAMPLE_NAMES), VALUES, max_size=4), min_size=1, max_size=6)


def _stored(value) -> bool:
    """SQLite stores ``value`` as something other than NULL (it stores NaN as NULL)."""
    return value is not None and value == value


def _picked(rows: list[dict]) -> list[tuple[dict, bool, bool]]:
    """Each of ``rows`` (each a plausible row with its own values put in) as the run log's schema stores and
    reads it back, with whether the old and the new condition pick it."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE TABLE gpu_samples ({', '.join(f'{n} {t}' for n, t in GPU_SAMPLE_COLUMNS)})")
        for values in rows:
            row = {**_plausible(), **{k: v for k, v in values.items() if k not in _NOT_NULL or _stored(v)}}
            conn.execute(f"INSERT INTO gpu_samples ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                         tuple(row.values()))
        cursor = conn.execute(f"SELECT *, ({old_suspect_row_sql()}) IS 1, ({suspect_row_sql()}) IS 1 "
                              f"FROM gpu_samples ORDER BY rowid")
        return [(dict(zip(GPU_SAMPLE_NAMES, r)), bool(r[-2]), bool(r[-1])) for r in cursor]
    finally:
        conn.close()


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(ROWS)
def test_every_row_the_old_check_refused_is_still_picked_and_no_other(rows):
    for row, old, new in _picked(rows):
        if old and row_problem(row):
            assert new, row
        if new:
            assert old, row


def test_every_refused_edge_value_in_every_column_is_still_picked():
    rows = [{name: value} for name in GPU_SAMPLE_NAMES for value in EDGES]
    refused = [(row, new) for row, old, new in _picked(rows) if old and row_problem(row)]
    assert len(refused) > len(GPU_SAMPLE_NAMES)      # the edges do reach each column's refusals
    assert all(new for _, new in refused)


def test_the_check_calls_no_sql_function_on_a_row():
    """``typeof`` on five columns of each row was a third of the pass; each column is now compared once."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE gpu_samples ({', '.join(f'{n} {t}' for n, t in GPU_SAMPLE_COLUMNS)})")
    program = [op[1] for op in conn.execute(f"EXPLAIN SELECT 1 FROM gpu_samples WHERE {suspect_row_sql()}")]
    reference = [op[1] for op in conn.execute(f"EXPLAIN SELECT 1 FROM gpu_samples WHERE {old_suspect_row_sql()}")]
    conn.close()
    assert "Function" not in program and "Function" in reference
    assert len(program) < len(reference)
