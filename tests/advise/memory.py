"""How much memory reading a log takes, for the tests that a long log is read in memory that does not grow with it."""

from __future__ import annotations

import tracemalloc

from gpuwise.advise.readers import read_log


def peak_bytes_reading(path) -> tuple[int, object]:
    """(the peak of Python's traced allocations while ``path`` is read, the log read)."""
    tracemalloc.start()
    try:
        log = read_log(path)
        return tracemalloc.get_traced_memory()[1], log
    finally:
        tracemalloc.stop()
