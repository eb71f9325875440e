"""The NaN/inf tally of a log read row by row (``NonFiniteCounter``, what a long log thinned on read keeps) is the
tally of its latest loss per step, in memory that does not grow with the rows; a resumed run re-doing steps
replaces what the first attempt logged from the step it resumed from."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuwise.advise.downsample import last_per_step
from gpuwise.advise.failures import NonFiniteCounter, nonfinite_tally


def _random_rows(rng: np.random.Generator) -> list[tuple[int, float]]:
    """Steps that only go up (some logged again in a row), losses NaN/inf in stretches."""
    rows, step = [], 0
    for _ in range(int(rng.integers(1, 120))):
        step += int(rng.integers(0, 3))   # 0: the step logged again
        bad = rng.random() < (0.7 if rows and not math.isfinite(rows[-1][1]) else 0.2)
        rows.append((step, math.nan if bad else 1.0))
    return rows


def _counted(rows) -> object:
    counter = NonFiniteCounter()
    for step, loss in rows:
        counter.add(step, math.isfinite(loss))
    return counter.tally()


@pytest.mark.parametrize("seed", range(300))
def test_rows_whose_steps_never_go_back_tally_as_their_latest_loss_per_step(seed):
    rows = _random_rows(np.random.default_rng(seed))
    per_step = last_per_step(rows)
    want = nonfinite_tally(np.array([s for s, _ in per_step]), np.array([v for _, v in per_step]))
    got = _counted(rows)
    assert got.nan_step == want.nan_step and got.skipped_count == want.skipped_count
    assert list(got.skipped_steps) == list(want.skipped_steps)


def test_a_resumed_run_redoing_its_nan_steps_finite_did_not_diverge_nor_skip_them():
    first = [(s, 1.0 if s < 1000 else math.inf) for s in range(1500)]   # diverged at 1,000, logged on to 1,499
    resumed = [(s, 0.9) for s in range(800, 3000)]                       # restarted from step 800's checkpoint
    tally = _counted(first + resumed)
    assert tally.nan_step is None and tally.skipped_count == 0


def test_a_resumed_run_that_diverges_again_ends_on_its_own_nan_step():
    first = [(s, 1.0 if s != 300 else math.nan) for s in range(1000)]             # one skipped step, 300
    resumed = [(s, 1.0 if s < 700 else math.nan) for s in range(500, 2000)]     # from 500, NaN from 700 on
    tally = _counted(first + resumed)
    assert tally.nan_step == 700 and tally.skipped_count == 1 and list(tally.skipped_steps) == [300]
