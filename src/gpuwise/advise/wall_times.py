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
"""

from __future__ import annotations

import numpy as np

from gpuwise.units import format_duration

EPOCH_MS_FROM = 1e11    # s: year 5138 as a Unix time in seconds, 1973-03-03 in milliseconds
EPOCH_MS_BELOW = 1e14   # ms: year 5138 (a Unix time in microseconds or nanoseconds is above it, and not read as ms)
MS_PER_S = 1000.0
MIN_LOGGED_ROW_GAP_S = 1e-4   # s: the least between two rows a training loop logs (a step and its loss read back)


def is_epoch_ms(times: np.ndarray) -> bool:
    """Whether the finite values of ``times`` (a log's time column, as written) are all Unix times in
    milliseconds (``EPOCH_MS_FROM`` to ``EPOCH_MS_BELOW``); False for a column without any finite value."""
    finite = times[np.isfinite(times)]
    return bool(len(finite)) and bool(np.all((finite >= EPOCH_MS_FROM) & (finite < EPOCH_MS_BELOW)))


def burst_note(steps: np.ndarray, t_s: np.ndarray) -> str | None:
    """Why a log's wall times (``t_s`` of its ``steps``, NaN where none) are no training pace: its rows are a median
    gap under ``MIN_LOGGED_ROW_GAP_S`` apart, written in a burst. None where they are a pace (or too few to say)."""
    timed = np.isfinite(t_s)
    times, timed_steps = t_s[timed], steps[timed]
    if len(times) < 2:
        return None
    row_gap_s = float(np.median(np.diff(times)))
    if row_gap_s >= MIN_LOGGED_ROW_GAP_S:
        return None
    span_s, span_steps = float(np.ptp(times)), int(np.ptp(timed_steps))
    return (f"the log's wall times span {_short_duration(span_s)} for {span_steps:,} steps "
            f"({_short_duration(row_gap_s)} between logged rows, the median): written in a burst, not a training "
            f"pace (a training loop logs a row {_short_duration(MIN_LOGGED_ROW_GAP_S)} or more apart); "
            "pass --step-time-s to price the plan")


def _short_duration(seconds: float) -> str:
    """``12 µs`` below a millisecond, else as ``format_duration`` writes it."""
    return f"{seconds * 1e6:.3g} µs" if seconds < 1 / MS_PER_S else format_duration(seconds)
