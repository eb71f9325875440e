"""The forecast band widened by the hold-out miss (advise/fit.py) keeps the rules the plain bootstrap band kept:
a loss that is never negative gets no band below 0 (a noisy curve near its floor printed "90 % band
-0.105-0.544"), and the steps to a target loss are widened as the loss band is (they were the bootstrap's alone,
which held the true trend about half the time)."""

from __future__ import annotations

import numpy as np

from gpuwise.advise.fit import fit_trend, steps_to_target


def _noisy_near_floor(seed: int):
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 400) * 5
    trend = 0.05 + 3 * (1 + steps / 50) ** -0.9
    return steps, np.abs(trend * (1 + 0.3 * rng.standard_normal(len(steps))))


def test_a_never_negative_loss_gets_no_band_below_zero():
    for seed in range(8):
        steps, loss = _noisy_near_floor(seed)
        fit = fit_trend(steps, loss)
        assert fit.holdout_error_per_log > 0          # the widening is what took it below 0
        low, high = fit.band(np.array([2 * steps[-1], 10 * steps[-1]]))
        assert np.all(low >= 0) and np.all(high > low)


def test_the_steps_to_a_target_are_widened_as_the_loss_band_is():
    steps, loss = _noisy_near_floor(3)
    fit = fit_trend(steps, loss)
    target = float(fit.predict(np.array([4 * steps[-1]]))[0])
    est = steps_to_target(fit, target)
    low, high = fit.band(np.array([est.step]))
    assert low[0] < target < high[0]            # the band at the point estimate straddles the target ...
    # ... so the step range reaches from where the band's low end gets there to where its high end does
    grid = np.geomspace(steps[-1], steps[-1] * 1e4, 400)
    band_low, band_high = fit.band(grid)
    assert est.low <= int(np.ceil(grid[np.argmax(band_low <= target)]))
    assert est.high is None or est.high >= int(grid[np.argmax(band_high <= target)])
