"""Synthetic curves with known answers: the diagnosis, the phases and their start steps, failures."""

import numpy as np
import pytest

from gpuwise.advise import AdviseSettings, Curve, TrainingLog, advise, analyze_curve

from .curves import curve, plateau_after, power_law


def test_power_law_with_noise_is_healthy_and_still_descending():
    s, y = power_law()
    a = analyze_curve(curve(s, y))
    assert a.diagnosis == "healthy"
    assert a.phases[-1].kind == "slow_descent"
    assert all(p.kind in ("fast_descent", "slow_descent") for p in a.phases)
    # the phase's drop is a median over its bins: it lies between the true drops at its two ends
    def true_drop(t):
        return 1 - (1.5 + 4 * (2 * t) ** -0.4) / (1.5 + 4 * t**-0.4)

    last = a.phases[-1]
    assert true_drop(last.end_step + 1) - 0.01 <= last.drop_per_doubling <= true_drop(last.start_step + 1) + 0.01


def test_step_plateau_is_found_with_its_start_step():
    s, y = plateau_after(300)
    a = analyze_curve(curve(s, y))
    assert a.diagnosis == "plateau"
    assert a.phases[0].kind == "fast_descent" and a.phases[-1].kind == "plateau"
    assert 240 <= a.phases[-1].start_step <= 380


def test_a_drop_after_a_plateau_starts_a_new_descent_and_a_new_fit():
    rng = np.random.default_rng(1)
    s = np.arange(1000)
    y = np.where(s < 500, 2.0, 1.2) + rng.normal(0, 0.02, len(s))  # an LR drop at step 500
    a = analyze_curve(curve(s, y))
    kinds = [p.kind for p in a.phases]
    assert kinds == ["plateau", "fast_descent", "plateau"]
    assert 400 <= a.phases[1].start_step <= 520
    assert a.fit_from_step == a.phases[1].start_step


def test_pure_noise_is_not_learning_and_the_advice_says_compute_is_not_the_cause():
    rng = np.random.default_rng(2)
    s = np.arange(800)
    report = advise(TrainingLog(curve(s, 2.3 + rng.normal(0, 0.1, len(s)))))
    assert report.diagnosis == "not_learning"
    text = " ".join(x.text for x in report.advice)
    assert "does not stop a loss from falling" in text
    for check in ("one-batch overfit", "LR range test", "labels", "data pipeline"):
        assert check in text


@pytest.mark.parametrize("k", [137, 700])
def test_nan_at_step_k_is_diverged_at_k(k):
    s, y = power_law(noise=0.01)
    y = y.copy()
    y[k] = np.nan
    y[k + 1:] = np.inf
    report = advise(TrainingLog(curve(s, y)))
    assert report.diagnosis == "diverged"
    assert report.analysis.nan_step == k
    assert report.to_dict()["forecast"]["available"] is False
    assert any(x.kind == "diverged" and str(k) in x.text for x in report.advice)


def test_a_loss_that_runs_away_is_diverged_from_its_best_step():
    rng = np.random.default_rng(3)
    s = np.arange(1000)
    base = 1.5 + 4 * (s + 1.0) ** -0.4
    y = np.where(s < 600, base, base[600] + 0.001 * np.exp((s - 600) / 50.0)) + rng.normal(0, 0.02, len(s))
    a = analyze_curve(curve(s, y))
    assert a.diagnosis == "diverged"
    assert 560 <= a.divergence_step <= 720
    assert a.phases[-1].kind == "rising"


def test_a_loss_swinging_by_a_fifth_is_noisy():
    s, y = power_law(noise=0.0)
    rng = np.random.default_rng(4)
    a = analyze_curve(curve(s, y * (1 + rng.normal(0, 0.2, len(s)))))
    assert a.diagnosis == "noisy"
    assert a.noise.relative_std == pytest.approx(0.2, rel=0.2)


def test_too_few_points_is_a_clear_error():
    from gpuwise.advise import AdviseError

    with pytest.raises(AdviseError, match="too few points"):
        analyze_curve(Curve(steps=np.arange(3), loss=np.array([1.0, 0.9, 0.8])))


def test_target_already_reached_is_reported_with_its_step():
    s, y = power_law(noise=0.0)
    a = analyze_curve(curve(s, y), AdviseSettings(target_loss=2.5))
    true_step = ((2.5 - 1.5) / 4) ** (-1 / 0.4) - 1  # 31
    # before the fitted range the smoothed trend decides; on a convex curve smoothing can only delay it
    assert true_step <= a.target_reached_step <= 1.25 * true_step
