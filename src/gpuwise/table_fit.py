"""Tables that fit a terminal: the first of several layouts, widest first, that fits in its columns.

``gpuwise watch`` and ``gpuwise report`` narrow their tables the same way (columns give way in a stated order,
then spacing tightens, then cells fold); this is the one search both use.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


def widest_fitting(layouts: Sequence[tuple[int, int, bool]], max_columns: int, build) -> Table:
    """The table of the first of ``layouts`` (widest first, each no wider than the one before) that fits in
    ``max_columns``, else of the last: the first tried, then a binary search, so a frame builds a handful of
    tables, not one per layout (a render is on watch's hot path, every interval)."""
    built: dict[int, Table] = {}

    def table(i: int) -> Table:
        if i not in built:
            built[i] = build(*layouts[i])
        return built[i]

    if table_columns(table(0)) <= max_columns:
        return table(0)
    lo, hi = 1, len(layouts) - 1       # layouts[lo - 1] is too wide; the answer lies in lo..hi
    while lo < hi:
        mid = (lo + hi) // 2
        if table_columns(table(mid)) <= max_columns:
            hi = mid
        else:
            lo = mid + 1
    return table(lo)


def table_columns(table: Table) -> int:
    """The columns ``table`` takes with no cell wrapped."""
    return Measurement.get(_MEASURE, _MEASURE.options, table).maximum


_MEASURE = Console(width=10_000, file=io.StringIO())   # only measures: never prints
