"""A steep start logged only every 10 steps: the loss fell 2.8 -> 0.8 over its first ~10 points, and the phase table
said "plateau from step 0". No slope window over the fall held ``min_window_points`` points, so each took the kind of
the plateau after it, and the leading-plunge rule, which reads such a fall as one, asked for it to span under 3 % of
the steps (a measure in steps, where the windows need points)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuwise.advise import advise as run_advise
from gpuwise.advise.data import TrainingLog
from gpuwise.advise.phases import FAST, PLATEAU, detect_phases

from .curves import curve

LEVEL = 0.8
LEVELS_OFF_BY_STEP = 100    # 0.8 + 2.0 * exp(-s / 30) is within 3 % of 0.8 from step ~100


def _logged_every_10_steps(last_step: int, seed: int):
    """2.8 at step 0, down to ~0.8 by step 100 and flat after, logged every 10 steps with 2 % noise."""
    rng = np.random.default_rng(seed)
    s = np.arange(0, last_step + 1, 10)
    return s, (LEVEL + 2.0 * np.exp(-s / 30.0)) * np.exp(rng.normal(0, 0.02, len(s)))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("last_step", [300, 2000])    # the fall over a third of the run, or its first 5 %
def test_a_steep_start_logged_every_10_steps_is_a_descent_then_a_plateau(last_step, seed):
    s, y = _logged_every_10_steps(last_step, seed)
    phases = detect_phases(s, y)
    assert [p.kind for p in phases] == [FAST, PLATEAU]
    assert LEVELS_OFF_BY_STEP / 2 <= phases[1].start_step <= 1.5 * LEVELS_OFF_BY_STEP
    assert phases[0].drop_per_doubling >= 0.10


def test_the_advice_reads_the_descent_before_the_plateau():
    report = run_advise(TrainingLog(curve=curve(*_logged_every_10_steps(2000, seed=0))))
    assert report.diagnosis == "plateau"
    assert [p.kind for p in report.analysis.phases] == [FAST, PLATEAU]


@pytest.mark.parametrize("seed", range(3))
def test_a_sparse_log_flat_from_the_start_stays_one_plateau(seed):
    rng = np.random.default_rng(seed)
    s = np.arange(0, 2001, 10)
    assert [p.kind for p in detect_phases(s, LEVEL * np.exp(rng.normal(0, 0.02, len(s))))] == [PLATEAU]

