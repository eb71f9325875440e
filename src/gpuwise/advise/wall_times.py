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
logs it is a group per row: read as before. ``MIN_FLUSHED_ROW_GAP_S`` guards only against a writer's short pauses:
a log written in bursts with pauses of a training pace between them (700 rows 10 µs apart, then 60 s idle, three
times over) has the times of a logger flushing 700 rows every 60 s, and is read as one (0.0086 s a step): nothing
in the times tells the two apart, nor does their count (two flushes are a pace, exact between their ends).

The step time (``step_time_s``) is read between the rows that end a group: ``MIN_TIMED_ROWS`` timed rows or more,
ending ``MIN_PACED_ROWS`` groups or more (two flushes of 100 rows: 1,000 steps between their ends, an exact pace).
It is the time over the steps of the intervals at a steady pace, within ``PAUSE_RATIO`` of the median interval's
(the rest are pauses: an eval, a checkpoint, a restart), not the median of the intervals' own paces: where times are
coarse (whole seconds, a step 0.3 s) an interval is 1 s over 3 or 4 steps, and their median is 1/3 s; their sum
is the pace. A log whose times give none says why (``wall_times_unused``), never that it has no times.
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
MIN_TIMED_ROWS = 3      # rows with a time: fewer give no step time (two plain rows are one interval, unchecked)
MIN_PACED_ROWS = 2      # rows ending a group written together: the ends of two flushes are a pace
# an interval over 3x the median interval's pace (per step) is a pause (an eval, a checkpoint, a restart), one under
# a third steps without their time; coarse times (whole seconds) spread a steady pace over at most 2x
PAUSE_RATIO = 3.0
_PRICE_IT = "pass --step-time-s to price the plan"


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
            f"pace (a training loop logs a row {_short_duration(MIN_LOGGED_ROW_GAP_S)} or more apart); {_PRICE_IT}")


def step_time_s(steps: np.ndarray, t_s: np.ndarray) -> float | None:
    """Wall seconds per optimizer step from a log's times (``t_s`` of its ``steps``, NaN where none), read between
    the rows that end a group written together (``paced_rows``): the time over the steps of the intervals at a steady
    pace (``steady_pace_s``). None where the log has under ``MIN_TIMED_ROWS`` timed rows, they end under
    ``MIN_PACED_ROWS`` groups, or no later row has a later time (``wall_times_unused`` says which)."""
    if np.count_nonzero(np.isfinite(t_s)) < MIN_TIMED_ROWS:
        return None
    paced_steps, times = paced_rows(steps, t_s)
    if len(times) < MIN_PACED_ROWS:
        return None
    dsteps, dt_s = np.diff(paced_steps).astype(float), np.diff(times)
    forward = (dsteps > 0) & (dt_s > 0)
    return steady_pace_s(dt_s[forward], dsteps[forward]) if forward.any() else None


def steady_pace_s(dt_s: np.ndarray, dsteps: np.ndarray) -> float:
    """Seconds per step over intervals of ``dt_s`` seconds and ``dsteps`` steps (both positive, at least one): the
    sum of the times over the sum of the steps of those within ``PAUSE_RATIO`` of the median interval's pace."""
    pace_s = dt_s / dsteps
    median_s = np.median(pace_s)
    steady = (pace_s <= median_s * PAUSE_RATIO) & (pace_s >= median_s / PAUSE_RATIO)
    return float(dt_s[steady].sum() / dsteps[steady].sum())


def wall_times_unused(steps: np.ndarray, t_s: np.ndarray) -> str | None:
    """Why a log's wall times (``t_s`` of its ``steps``, NaN where none) give no step time, in one line: written in
    a burst (``burst_note``), too few, or not later at later steps. None where they give one, or there are none."""
    timed_rows = int(np.count_nonzero(np.isfinite(t_s)))
    if not timed_rows:
        return None
    burst = burst_note(steps, t_s)
    if burst or step_time_s(steps, t_s) is not None:
        return burst
    if timed_rows < MIN_TIMED_ROWS:
        return (f"the log has wall times on {timed_rows} row{'s' if timed_rows > 1 else ''}: too few for a step time, "
                f"which takes {MIN_TIMED_ROWS} or more; {_PRICE_IT}")
    return f"the log's wall times do not advance with its steps: no pace between its rows; {_PRICE_IT}"


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
