"""Which time columns are Unix milliseconds (``wall_times.is_epoch_ms``): every finite time from 1973 to 5138 in
ms, which as seconds would be over 3,000 years away."""

from __future__ import annotations

import numpy as np
import pytest

from gpuwise.advise.wall_times import EPOCH_MS_BELOW, EPOCH_MS_FROM, is_epoch_ms


@pytest.mark.parametrize("times, expected", [
    ([1.7e12, 1.7e12 + 250, np.nan], True),          # ms, a missing time left out
    ([1.7e9, 1.7e9 + 0.25], False),                 # Unix seconds
    ([0.0, 0.25, 1e6], False),                      # seconds since the start
    ([EPOCH_MS_FROM, EPOCH_MS_BELOW * 0.99], True),   # 1973 to 5138, in ms
    ([1.7e12, 1.7e9], False),                       # not every time in ms: left as written
    ([1.7e15, 1.7e15 + 250_000], False),            # microseconds: not read as ms
    ([np.nan, np.nan], False),
])
def test_a_column_is_unix_milliseconds_only_where_every_time_is(times, expected):
    assert is_epoch_ms(np.array(times, dtype=float)) is expected
