"""The forecast of a short run with a long learning-rate warm-up is fitted from the end of the warm-up (the log's
``lr`` peak), not from 10 % of the steps, where the warm-up's shoulder made an exponential with a floor far too
high win the fit (and the 'Stop' advice came early)."""

import numpy as np
import pytest

from gpuwise.advise import AdviseSettings, Curve, advise, read_log
from gpuwise.advise.analysis import analyze_curve
from gpuwise.catalog import load_catalog

WARMUP_STEPS = 100


def _warmup_run(n: int = 300, warmup: int = WARMUP_STEPS, seed: int = 0):
    """A 300-step run whose linear warm-up takes a third of it: the loss is a power law of the learning rate's
    running sum (the progress the steps made), with 2 % noise. Returns steps, noisy loss, lr and the true loss
    at any later step."""
    s = np.arange(0, n)
    lr = np.where(s < warmup, (s + 1.0) / warmup, 1.0) * 1e-3
    progress = np.cumsum(lr) / 1e-3

    def true_loss(step: float) -> float:
        return 1.0 + 3.0 * (1.0 + (progress[-1] + (step - s[-1])) / 10.0) ** -0.7

    clean = 1.0 + 3.0 * (1.0 + progress / 10.0) ** -0.7
    loss = clean * (1.0 + np.random.default_rng(seed).normal(0, 0.02, n))
    return s, loss, lr, true_loss


def test_the_fit_starts_where_the_learning_rate_peaks_and_forecasts_the_tail():
    s, loss, lr, true_loss = _warmup_run()
    a = analyze_curve(Curve(s, loss, lr=lr))
    assert a.fit_from_step >= WARMUP_STEPS - 2      # lr reaches 99 % of its peak at step 98
    horizon = 2 * int(s[-1])
    forecast = float(a.fit.predict(horizon))
    assert forecast == pytest.approx(true_loss(horizon), rel=0.04)      # from step 29: 9.7 % too high


def test_a_csv_with_a_warm_up_gets_no_early_stop_from_a_floor_the_warm_up_made(tmp_path):
    s, loss, lr, true_loss = _warmup_run()
    csv = tmp_path / "warmup.csv"
    csv.write_text("step,loss,lr,time\n" + "".join(f"{i},{v:.6f},{r:.6g},{0.05 * i:.3f}\n"
                                                   for i, v, r in zip(s, loss, lr)))
    report = advise(read_log(str(csv)), AdviseSettings(), load_catalog())
    d = report.to_dict()
    assert d["forecast"]["fit_from_step"] >= WARMUP_STEPS - 2
    last = d["forecast"]["points"][-1]
    assert last["low"] <= true_loss(last["step"]) <= last["high"]


def test_a_run_without_a_logged_rate_or_without_a_warm_up_keeps_the_first_tenth_rule():
    s, loss, _, _ = _warmup_run()
    no_lr = analyze_curve(Curve(s, loss))
    constant = analyze_curve(Curve(s, loss, lr=np.full(len(s), 1e-3)))
    assert no_lr.fit_from_step == constant.fit_from_step == int(0.1 * s[-1])
