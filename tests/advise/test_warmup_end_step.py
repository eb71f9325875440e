"""``warmup_end_step``: where the logged learning rate peaks, the fit's earliest start on a warmed-up run."""

import numpy as np

from gpuwise.advise import Curve
from gpuwise.advise.analysis import MIN_POINTS_AFTER_WARMUP, analyze_curve, warmup_end_step

from .test_warmup_fit_start import _warmup_run


def test_a_run_still_warming_up_is_fitted_by_the_first_tenth_rule():
    s, loss, lr, _ = _warmup_run(warmup=300 - MIN_POINTS_AFTER_WARMUP + 5)
    assert np.count_nonzero(s >= warmup_end_step(s, lr)) < MIN_POINTS_AFTER_WARMUP
    assert analyze_curve(Curve(s, loss, lr=lr)).fit_from_step == int(0.1 * s[-1])


def test_warmup_end_is_the_first_step_at_the_peak_rate():
    steps = np.arange(10, 20)
    lr = np.array([np.nan, 1, 2, 3, 3.0, 2.999, 2, 1, np.nan, 0.5])
    assert warmup_end_step(steps, lr) == 13
    assert warmup_end_step(steps, np.full(10, np.nan)) is None
    assert warmup_end_step(steps, None) is None
