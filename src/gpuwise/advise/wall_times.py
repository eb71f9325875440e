"""The unit of a log's wall-time column: seconds, or Unix times in milliseconds.

Most loggers write seconds (TensorBoard's wall time, W&B's ``_timestamp``, ``time.time()``); MLflow writes its
``timestamp`` in milliseconds since the epoch. Read as seconds, those make every step 1000x too long, and
every price with it. The magnitudes tell the two apart: a Unix time in seconds is about 1.7e9 (2023), one in
milliseconds about 1.7e12. A time of ``EPOCH_MS_FROM`` (1e11) seconds or more, from any origin, is over 3,000
years away and no time a run logged; in milliseconds it is 1973-03-03, and ``EPOCH_MS_BELOW`` (1e14) ms is the
year 5138: a column whose every time lies between them is Unix milliseconds.
"""

from __future__ import annotations

import numpy as np

EPOCH_MS_FROM = 1e11    # s: year 5138 as a Unix time in seconds, 1973-03-03 in milliseconds
EPOCH_MS_BELOW = 1e14   # ms: year 5138 (a Unix time in microseconds or nanoseconds is above it, and not read as ms)
MS_PER_S = 1000.0


def is_epoch_ms(times: np.ndarray) -> bool:
    """Whether the finite values of ``times`` (a log's time column, as written) are all Unix times in
    milliseconds (``EPOCH_MS_FROM`` to ``EPOCH_MS_BELOW``); False for a column without any finite value."""
    finite = times[np.isfinite(times)]
    return bool(len(finite)) and bool(np.all((finite >= EPOCH_MS_FROM) & (finite < EPOCH_MS_BELOW)))
