"""Noisy curves with a known shape: the plateau is found where the curve goes flat, a descent is never
called a plateau from step 0, and the forecast never stands above the trend the run has reached."""

from __future__ import annotations

import numpy as np
import pytest

from gpuwise.advise.analysis import analyze_curve

from .curves import curve, plateau_after, power_law_flat_after, towards_zero

SEEDS = range(4)


def _stops_halving_step(flat_from: int = 350) -> int:
    """The step from which on the clean towards-zero curve falls by less than half of itself per doubling of the steps."""
    t = np.arange(1, 2000, dtype=float)
    fast_part = 2.3 * np.exp(-t * 5.0 / flat_from)
    slope = -(t * 5.0 / flat_from) * fast_part / (0.012 + fast_part)     # d ln L / d ln t
    return int(t[np.nonzero(1 - 2.0 ** slope >= 0.5)[0][-1] + 1])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_loss_that_looks_flat_from_step_350_is_a_plateau_from_where_it_stops_halving_not_a_fast_descent_to_the_end(seed):
    # By step 350 it has lost 99 % of its start and looks flat on a linear plot, but it still falls by most of
    # itself per doubling (87 %) until about step 490: flat by the share of what it gained only from there on
    # (``PhaseThresholds.gain_share_below_drop``; before, "plateau from ~336" beside "the loss itself falls 55 %").
    s, y = towards_zero(n=800, flat_from=350, seed=seed)
    a = analyze_curve(curve(s, y))
    assert a.phases[0].kind == "fast_descent"
    assert a.phases[-1].kind == "plateau"
    half = _stops_halving_step()
    assert 0.8 * half <= a.phases[-1].start_step <= 1.25 * half, [(p.kind, p.start_step) for p in a.phases]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_noisy_descent_at_the_start_is_not_called_a_plateau_from_step_0(seed):
    s, y = power_law_flat_after(step=300, noise=0.1, seed=seed)
    a = analyze_curve(curve(s, y))
    assert a.phases[0].kind == "fast_descent" and a.phases[0].end_step >= 20
    assert a.phases[-1].kind == "plateau" and a.phases[-1].start_step <= 400


@pytest.mark.parametrize("make", [lambda seed: towards_zero(seed=seed), lambda seed: power_law_flat_after(seed=seed),
                                  lambda seed: plateau_after(300, seed=seed)])
@pytest.mark.parametrize("seed", SEEDS)
def test_the_forecast_never_stands_above_the_smoothed_trend_already_reached(make, seed):
    s, y = make(seed)
    a = analyze_curve(curve(s, y))
    future = np.array([s[-1] + 1, 2 * s[-1], 4 * s[-1]])
    reached = float(a.trend[-1])
    assert np.all(a.fit.predict(future) <= reached + 1e-12)
    assert a.current_trend_loss <= reached + 1e-12
    low, high = a.fit.band(future)
    assert np.all(low <= a.fit.predict(future) + 1e-9)
