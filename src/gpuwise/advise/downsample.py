"""A loss curve of any length kept in bounded memory: one point per step bin, the bins widened as needed.

Rows arrive in file order. Bins start one step wide (then this is exactly "the latest value of each
step", as a resumed run that re-does steps needs); whenever there are more than ``2 * max_points`` bins,
the width doubles and neighbouring bins merge. Each bin keeps its row of the highest step (the later row on
a tie), so a point is a real logged row, not an average: the noise of the curve is kept, only thinned.
The first row read is kept too (the starting loss matters to the phases and the fit).
Memory: O(max_points) rows whatever the file's length; the result has at most ``2 * max_points + 1`` points.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_CURVE_POINTS = 20_000   # bins kept below 2x this; the analysis is fast and stable far below


class StepBins:
    def __init__(self, max_points: int = MAX_CURVE_POINTS) -> None:
        if max_points < 1:
            raise ValueError("max_points must be >= 1")
        self.max_points = max_points
        self.width = 1
        self.rows_read = 0
        self._bins: dict[int, tuple] = {}
        self._first: tuple | None = None

    def add(self, row: tuple) -> None:
        """``row[0]`` is the step (a whole number >= 0); the rest is kept as given."""
        self.rows_read += 1
        if self._first is None:
            self._first = row
        key = row[0] // self.width
        held = self._bins.get(key)
        if held is None or row[0] >= held[0]:
            self._bins[key] = row
        if len(self._bins) > 2 * self.max_points:
            self._widen()

    def _widen(self) -> None:
        self.width *= 2
        merged: dict[int, tuple] = {}
        for key in sorted(self._bins):   # ascending: within a merged bin the higher step comes last
            merged[key // 2] = self._bins[key]
        self._bins = merged

    def rows(self) -> list[tuple]:
        """One row per bin, by step (and the first row read, when its bin kept another and it is the lowest)."""
        out = [self._bins[k] for k in sorted(self._bins)]
        if self.width > 1 and out and self._first is not None and self._first[0] < out[0][0]:
            out.insert(0, self._first)
        return out


def last_per_step(rows: Iterable[tuple]) -> list[tuple]:
    """One row per step; a step logged twice (a resumed run re-doing steps) keeps its latest value."""
    by_step: dict[int, tuple] = {}
    for row in rows:
        by_step[int(row[0])] = row
    return [by_step[s] for s in sorted(by_step)]
