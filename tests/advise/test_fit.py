"""Trend fits: BIC picks the family that made the data; forecasts hold on held-out tails."""

import numpy as np
import pytest

from gpuwise.advise.fit import fit_trend, steps_to_target

from .curves import power_law


def test_bic_picks_the_power_law_for_power_law_data_and_recovers_its_exponent():
    s, y = power_law(n=2000, noise=0.03)
    fit = fit_trend(s[:1000], y[:1000])
    assert fit.best.family.name == "power_law"
    params = fit.best.family.in_steps(fit.best.params, fit.t_scale)
    assert params["c"] == pytest.approx(0.4, rel=0.15)
    assert params["a"] == pytest.approx(1.5, abs=0.1)


def test_forecast_of_the_held_out_tail_is_within_two_percent():
    s, y = power_law(n=2000, noise=0.03, seed=5)
    fit = fit_trend(s[:1000], y[:1000])
    tail = np.array([1500, 1999])
    truth = 1.5 + 4 * (tail + 1.0) ** -0.4
    assert np.all(np.abs(fit.predict(tail) / truth - 1) < 0.02)
    low, high = fit.band(tail)
    assert np.all(low <= fit.predict(tail)) and np.all(fit.predict(tail) <= high)


def test_bic_picks_the_exponential_for_exponential_data():
    rng = np.random.default_rng(6)
    s = np.arange(1000)
    y = 0.3 + 2.0 * np.exp(-s / 150.0) + rng.normal(0, 0.02, len(s))
    fit = fit_trend(s, y)
    assert fit.best.family.name == "exponential"
    assert fit.best.family.in_steps(fit.best.params, fit.t_scale)["c"] == pytest.approx(1 / 150, rel=0.1)


def test_bic_picks_a_constant_for_pure_noise():
    rng = np.random.default_rng(7)
    s = np.arange(600)
    fit = fit_trend(s, 2.0 + rng.normal(0, 0.1, len(s)))
    assert fit.best.family.name == "constant"


def test_steps_to_target_brackets_the_true_step_and_says_never_below_the_floor():
    s, y = power_law(n=1000, noise=0.03, seed=8)
    fit = fit_trend(s, y)
    true_step = ((1.75 - 1.5) / 4) ** (-1 / 0.4) - 1  # 1023
    est = steps_to_target(fit, 1.75)
    assert est.low <= true_step <= est.high
    assert steps_to_target(fit, 1.0).step is None  # below the asymptote a ≈ 1.5


def test_a_long_log_is_thinned_before_fitting():
    s, y = power_law(n=60000, noise=0.05, seed=9)
    fit = fit_trend(s, y)
    assert fit.best.n_points <= 1500
    assert fit.best.family.name == "power_law"
