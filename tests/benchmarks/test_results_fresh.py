"""Every committed results file matches the code and data it measures (a hash of its inputs), so a
figure in benchmarks/results/ is never older than what it describes. Hashing only: nothing is run."""

import pytest

from benchmarks.registry import BENCHMARKS
from benchmarks.staleness import stale_reason

RUN_BY_MAKE_BENCH = [b for b in BENCHMARKS if not b.excluded]


@pytest.mark.parametrize("bench", RUN_BY_MAKE_BENCH, ids=lambda b: b.name)
def test_committed_results_are_not_older_than_their_inputs(bench):
    reason = stale_reason(bench)
    assert reason is None, f"{reason} (or `make bench-stale` for every stale one)"
