"""A log's wall-time column: its unit (seconds, or Unix times in milliseconds), and whether it is a training pace.

Most loggers write seconds (TensorBoard's wall time, W&B's ``_timestamp``, ``time.time()``); MLflow writes its
``timestamp`` in milliseconds since the epoch. Read as seconds, those make every step 1000x too long, and
every price with it. The magnitudes tell the two apart: a Unix time in seconds is about 1.7e9 (2023), one in
milliseconds about 1.7e12. A time of ``EPOCH_MS_FROM`` (1e11) seconds or more, from any origin, is over 3,000
years away and no time a run logged; in milliseconds it is 1973-03-03, and ``EPOCH_MS_BELOW`` (1e14) ms is the
year 5138: a column whose every time lies between them is Unix milliseconds.

A log written in one burst (converted, replayed, or logged after the fact: a ``SummaryWriter`` writes a scalar in
about 10 µs) carries times, but no step time: read as a pace, it prices the rest of a run at nothing. A training
loop that logs a row has run at least one step and read its loss back in between, ``MIN_LOGGED_ROW_GAP_S`` or more
even for a CUDA-graphed step; rows a median gap below it apart were written in a burst. The gap is between logged
rows, not per step: a fast run (0.5 ms a step) logging every 100th step is a pace.

A buffered logger (a CSV logger flushing 100 rows at a time, an offline sync) stamps the rows of one flush with the
flush's time, a few µs apart or equal, and the flushes a training pace apart. Rows under ``MIN_LOGGED_ROW_GAP_S``
after the row before were written together, in one group; a group's last row is the step its time belongs to, and the
time since the group before is shared among its rows (``row_gaps_s``). Read row by row, such a log was called a burst
(its median gap is a few µs) and, in groups of two, priced each step twice (a flush's time over the steps since the
previous row, not since the previous flush). A log whose rows are a median gap under ``MIN_LOGGED_ROW_GAP_S`` apart is
read as flushed in groups only where its rows are a median ``MIN_FLUSHED_ROW_GAP_S`` apart with each group's time
shared: a burst has groups too (a ``SummaryWriter`` pauses on its file every 10 or so events, a few of its rows a
millisecond), and that pause shared among a group's rows must not read as a pace. A loop that stamps each row as it
logs it is a group per row: read as before.
"""

from __future__ import annotations

import numpy as np

from gpuwise.units import format_duration

EPOCH_MS_FROM = 1e11    # s: year 5138 as a Unix time in seconds, 1973-03-03 in milliseconds
EPOCH_MS_BELOW = 1e14   # ms: year 5138 (a Unix time in microseconds or nanoseconds is above it, and not read as ms)
MS_PER_S = 1000.0
MIN_LOGGED_ROW_GAP_S = 1e-4   # s: the least between two rows a training loop logs (a step and its loss read back)
# s: the least per row, each group's time shared, of a log flushed in groups: a writer's own pause on its file, shared
# among the ten or so rows written before it, stays under it (a run logging a row under 10 ms apart through a
# buffered logger is refused as a burst, as before: pass --step-time-s)
MIN_FLUSHED_ROW_GAP_S = 1e-2


def is_epoch_ms(times: np.ndarray) -> bool:
    """Whether the finite values of ``times`` (a log's time column, as written) are all Unix times in
    milliseconds (``EPOCH_MS_FROM`` to ``EPOCH_MS_BELOW``); False for a column without any finite value."""
    finite = times[np.isfinite(times)]
    return bool(len(finite)) and bool(np.all((finite >= EPOCH_MS_FROM) & (finite < EPOCH_MS_BELOW)))


def burst_note(steps: np.ndarray, t_s: np.ndarray) -> str | None:
    """Why a log's wall times (``t_s`` of its ``steps``, NaN where none) are no training pace: its rows are a median
    gap under ``MIN_LOGGED_ROW_GAP_S`` apart, and under ``MIN_FLUSHED_ROW_GAP_S`` with the time of each group of rows
    written together shared among them (``row_gaps_s``): written in a burst. None where they are a pace (or too few
    to say)."""
    timed = np.isfinite(t_s)
    times, timed_steps = t_s[timed], steps[timed]
    if len(times) < 2:
        return None
    row_gap_s = float(np.median(np.diff(times)))
    if row_gap_s >= MIN_LOGGED_ROW_GAP_S or float(np.median(row_gaps_s(times))) >= MIN_FLUSHED_ROW_GAP_S:
        return None
    span_s, span_steps = float(np.ptp(times)), int(np.ptp(timed_steps))
    return (f"the log's wall times span {_short_duration(span_s)} for {span_steps:,} steps "
            f"({_short_duration(row_gap_s)} between logged rows, the median): written in a burst, not a training "
            f"pace (a training loop logs a row {_short_duration(MIN_LOGGED_ROW_GAP_S)} or more apart); "
            "pass --step-time-s to price the plan")


def paced_rows(steps: np.ndarray, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(steps, times) of the timed rows (``t_s`` of ``steps``, NaN where none) that end a group of rows written
    together (``_group_starts``): the rows a pace is read between. All the timed rows where each is its own group."""
    timed = np.isfinite(t_s)
    times, timed_steps = t_s[timed], steps[timed]
    if not len(times):
        return timed_steps, times
    ends = _group_ends(_group_starts(times), len(times))
    return timed_steps[ends], times[ends]


def row_gaps_s(times: np.ndarray) -> np.ndarray:
    """Seconds between consecutive logged rows (``times``, finite, in step order; one fewer than the rows), each
    group of rows written together sharing the time from the row before it to its last row (the first group: from
    its first row) equally: they add up to the log's span. The plain gaps where each row is its own group."""
    starts = _group_starts(times)
    ends = _group_ends(starts, len(times))
    before = np.maximum(starts - 1, 0)      # the last row of the group before (the first group: its first row)
    shares = ends - before                  # the rows each group's time is shared among
    return np.repeat((times[ends] - times[before]) / np.maximum(shares, 1), shares)


def _group_starts(times: np.ndarray) -> np.ndarray:
    """The rows that start a group of rows written together: the first row, and each row ``MIN_LOGGED_ROW_GAP_S``
    or more after the row before (one less after it was written with it: a burst, or one flush of a buffer)."""
    return np.concatenate(([0], np.nonzero(np.diff(times) >= MIN_LOGGED_ROW_GAP_S)[0] + 1))


def _group_ends(starts: np.ndarray, rows: int) -> np.ndarray:
    """The last row of each group that starts at ``starts``, of ``rows`` rows in all."""
    return np.append(starts[1:] - 1, rows - 1)


def _short_duration(seconds: float) -> str:
    """``12 µs`` below a millisecond, else as ``format_duration`` writes it."""
    return f"{seconds * 1e6:.3g} µs" if seconds < 1 / MS_PER_S else format_duration(seconds)
