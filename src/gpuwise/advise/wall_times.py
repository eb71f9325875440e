"""A log's wall-time column: its unit (seconds, or Unix times in milliseconds), and whether it is a training pace.

Most loggers write seconds (TensorBoard's wall time, W&B's ``_timestamp``, ``time.time()``); MLflow writes its
``timestamp`` in milliseconds since the epoch. Read as seconds, those make every step 1000x too long, and
every price with it. The magnitudes tell the two apart: a Unix time in seconds is about 1.7e9 (2023), one in
milliseconds about 1.7e12. A time of ``EPOCH_MS_FROM`` (1e11) seconds or more, from any origin, is over 3,000
years away and no time a run logged; in milliseconds it is 1973-03-03, and ``EPOCH_MS_BELOW`` (1e14) ms is the
year 5138: a column whose every time lies between them is Unix milliseconds.

A log written in one burst (converted, replayed, or logged after the fact: a ``SummaryWriter`` writes a scalar in
about 10 µs) carries times, but no step time: read as a pace, it prices the rest of a run at nothing. A GPU training
step that logs a loss takes ``MIN_TRAINING_STEP_S`` or more (kernel launches, the sync that reads the loss), so a
pace under it is no training pace.
"""

from __future__ import annotations

import numpy as np

from gpuwise.units import format_duration

EPOCH_MS_FROM = 1e11    # s: year 5138 as a Unix time in seconds, 1973-03-03 in milliseconds
EPOCH_MS_BELOW = 1e14   # ms: year 5138 (a Unix time in microseconds or nanoseconds is above it, and not read as ms)
MS_PER_S = 1000.0
MIN_TRAINING_STEP_S = 1e-3   # s: the least a GPU training step that logs a loss takes; less a step is a burst


def is_epoch_ms(times: np.ndarray) -> bool:
    """Whether the finite values of ``times`` (a log's time column, as written) are all Unix times in
    milliseconds (``EPOCH_MS_FROM`` to ``EPOCH_MS_BELOW``); False for a column without any finite value."""
    finite = times[np.isfinite(times)]
    return bool(len(finite)) and bool(np.all((finite >= EPOCH_MS_FROM) & (finite < EPOCH_MS_BELOW)))


def burst_note(steps: np.ndarray, t_s: np.ndarray, step_time_s: float) -> str | None:
    """Why ``step_time_s`` (the median wall seconds per step of a log's ``steps`` and times ``t_s``, NaN where
    none) is no training pace: it is under ``MIN_TRAINING_STEP_S``, the log was written in a burst. None where it
    is a pace (``MIN_TRAINING_STEP_S`` or more)."""
    if step_time_s >= MIN_TRAINING_STEP_S:
        return None
    timed = np.isfinite(t_s)
    span_s, span_steps = float(np.ptp(t_s[timed])), int(np.ptp(steps[timed]))
    return (f"the log's wall times span {_short_duration(span_s)} for {span_steps:,} steps "
            f"({_short_duration(step_time_s)} a step, the median): written in a burst, not a training pace "
            f"(a training step takes {_short_duration(MIN_TRAINING_STEP_S)} or more); "
            "pass --step-time-s to price the plan")


def _short_duration(seconds: float) -> str:
    """``12 µs`` below a millisecond, else as ``format_duration`` writes it."""
    return f"{seconds * 1e6:.3g} µs" if seconds < 1 / MS_PER_S else format_duration(seconds)
