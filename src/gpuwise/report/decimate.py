"""Min/max decimation of a line before it is drawn.

A day's log at 1 s has 86,400 samples per line, on a timeline about a thousand pixels wide: drawing each one took
seconds and made a large file, for the same picture. Each line is cut into ``PLOT_BUCKETS`` equal stretches of
time, and in each only its lowest and its highest sample are kept (the standard min/max decimation: spikes and
dips stay visible, the line's envelope is the same), with the first and last sample of each unbroken run, so a
gap (a NaN: a gap between samples, a missing reading) starts and ends where it did. A line of
``DECIMATE_ABOVE_POINTS`` points or fewer is drawn exactly.
"""

from __future__ import annotations

import numpy as np

PLOT_BUCKETS = 800                       # about the width of the timeline's axes in pixels (9 in at 110 dpi)
DECIMATE_ABOVE_POINTS = 2 * PLOT_BUCKETS  # a line with no more points than decimation would keep is drawn as it is


def min_max_decimate(t: np.ndarray, y: np.ndarray, buckets: int = PLOT_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """The points of the line (``t`` ascending, NaN in ``t`` or ``y`` a break) that drawing it needs: per each of
    ``buckets`` equal stretches of ``t`` and unbroken run, its min and max of ``y``; each run's first and last
    point; one NaN point for each break. ``t``, ``y`` unchanged at ``DECIMATE_ABOVE_POINTS`` points or fewer."""
    t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    if t.size <= DECIMATE_ABOVE_POINTS:
        return t, y
    broken = np.isnan(t) | np.isnan(y)
    first_break = broken & ~np.concatenate(([False], broken[:-1]))    # one break kept for each run of them
    drawn = np.flatnonzero(~broken)
    if drawn.size == 0:
        keep = np.flatnonzero(first_break)
        return t[keep], y[keep]
    t_drawn, y_drawn = t[drawn], y[drawn]
    run = np.cumsum(broken)[drawn]                                     # the unbroken run of each drawn point
    width_s = (t_drawn[-1] - t_drawn[0]) / buckets or 1.0
    bucket = np.minimum(((t_drawn - t_drawn[0]) / width_s).astype(np.int64), buckets - 1)
    group = run * buckets + bucket                                     # ascending: a group is a slice of drawn
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    ends = np.append(starts[1:], group.size) - 1
    by_value = np.lexsort((y_drawn, group))                            # within each group, lowest first
    run_edges = np.flatnonzero(np.diff(run, prepend=-1, append=run[-1] + 1))
    keep_drawn = np.concatenate((by_value[starts], by_value[ends], run_edges[:-1], run_edges[1:] - 1))
    keep = np.union1d(drawn[keep_drawn], np.flatnonzero(first_break))
    return t[keep], y[keep]
