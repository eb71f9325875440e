import numpy as np
import pytest

from gpuwise.advise.smoothing import auto_weight, ema_debiased, ema_zero_phase, noise_level


def test_debiased_ema_matches_tensorboards_formula():
    # w=0.5: m=0.5 -> 1.0; m=1.25 -> 1.25/0.75; m=2.125 -> 2.125/0.875 (Adam-style bias correction)
    out = ema_debiased(np.array([1.0, 2.0, 3.0]), 0.5)
    assert out == pytest.approx([1.0, 1.25 / 0.75, 2.125 / 0.875])


def test_debiased_ema_skips_nan_and_keeps_the_last_value():
    out = ema_debiased(np.array([1.0, np.nan, 1.0]), 0.9)
    assert out[1] == out[0] == pytest.approx(1.0)
    assert out[2] == pytest.approx(1.0)


def test_zero_phase_trend_has_no_lag_on_a_falling_line():
    x = np.linspace(10.0, 0.0, 500)
    trend = ema_zero_phase(x, 0.95)
    forward = ema_debiased(x, 0.95)
    interior = slice(100, 400)  # five spans (w=0.95: 19 points) from either end
    assert np.max(np.abs(trend[interior] - x[interior])) < 0.02
    assert np.min(forward[interior] - x[interior]) > 0.3  # the one-sided EMA lags a falling curve by ~19 points


def test_zero_phase_trend_keeps_the_steep_start_of_a_curve():
    s = np.arange(1000.0)
    x = 0.5 + 2.0 * np.exp(-s / 60.0)
    trend = ema_zero_phase(x, auto_weight(len(x)))
    assert trend[0] == pytest.approx(x[0], rel=0.02)


def test_noise_level_is_relative_to_the_trend():
    rng = np.random.default_rng(0)
    s = np.arange(3000)
    loss = 2.0 * (1 + rng.normal(0, 0.05, len(s)))
    trend = ema_zero_phase(loss, auto_weight(len(s)))
    level = noise_level(s, loss, trend)
    assert level.relative_std == pytest.approx(0.05, rel=0.15)
    assert level.absolute_std == pytest.approx(0.10, rel=0.15)
