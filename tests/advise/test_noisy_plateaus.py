"""Noisy curves with a known shape: the plateau is found where the curve goes flat, a descent is never
called a plateau from step 0, and the forecast never stands above the trend the run has reached."""

from __future__ import annotations

import numpy as np
import pytest

from gpuwise.advise.analysis import analyze_curve

from .curves import curve, plateau_after, power_law_flat_after, towards_zero

SEEDS = range(4)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_loss_that_looks_flat_from_step_350_is_a_plateau_from_about_350_not_a_fast_descent_to_the_end(seed):
    s, y = towards_zero(n=800, flat_from=350, seed=seed)
    a = analyze_curve(curve(s, y))
    assert a.phases[0].kind == "fast_descent"
    assert a.phases[-1].kind == "plateau"
    assert 200 <= a.phases[-1].start_step <= 450, [(p.kind, p.start_step) for p in a.phases]


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
