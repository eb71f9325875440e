"""The noise-scale estimator against linear regression with Gaussian noise, where B_simple is known.

Model y = x·w* + ε, x ~ N(0, I_d), ε ~ N(0, σ²), per-sample loss ½(x·w − y)², δ = w − w*.
Per-sample gradient g = x(x·δ − ε): mean G = E[x xᵀ]δ = δ. By Isserlis, E[(x·δ)² x xᵀ] = |δ|² I + 2δδᵀ, so
E[g gᵀ] = |δ|² I + 2δδᵀ + σ² I and Σ = E[g gᵀ] − G Gᵀ = δδᵀ + (|δ|² + σ²) I.
Hence tr Σ = (d + 1)|δ|² + dσ² and B_simple = tr Σ / |G|² = d + 1 + dσ²/|δ|².
"""

import pytest
import torch

from gpuwise.advise.noise_scale import (NoiseScaleMeter, grad_sq_norm, pollux_efficiency, sample_efficiency,
                                        step_efficiency, steps_ratio, trace_sigma, true_grad_sq)


def _micro_batch_grads(w: torch.Tensor, w_true: torch.Tensor, sigma: float, n_groups: int, batch: int,
                       gen: torch.Generator) -> torch.Tensor:
    """Gradients of the mean loss of ``n_groups`` independent micro-batches, by autograd in one backward."""
    d = w.numel()
    x = torch.randn(n_groups, batch, d, generator=gen, dtype=torch.float64)
    y = x @ w_true + sigma * torch.randn(n_groups, batch, generator=gen, dtype=torch.float64)
    weights = w.detach().expand(n_groups, d).clone().requires_grad_(True)  # one copy of w per micro-batch
    pred = torch.einsum("gbd,gd->gb", x, weights)
    loss = (0.5 * (pred - y) ** 2).mean(dim=1).sum()  # sum of the micro-batch mean losses
    (grads,) = torch.autograd.grad(loss, weights)
    return grads


def test_meter_recovers_b_simple_of_linear_regression_in_closed_form():
    gen = torch.Generator().manual_seed(0)
    d, sigma, micro, k, steps = 16, 1.0, 8, 4, 3000
    w_true = torch.randn(d, generator=gen, dtype=torch.float64)
    w = w_true + 0.25 * torch.randn(d, generator=gen, dtype=torch.float64)
    delta_sq = float(((w - w_true) ** 2).sum())
    true_b_simple = d + 1 + d * sigma**2 / delta_sq

    grads = _micro_batch_grads(w, w_true, sigma, steps * k, micro, gen).reshape(steps, k, d)
    meter = NoiseScaleMeter(ema_weight=0.999)
    for g in grads:
        step_grad = g.mean(dim=0)  # the accumulated step over k micro-batches: batch k·micro
        meter.update([float(v) for v in (g**2).sum(dim=1)], micro, float((step_grad**2).sum()), k * micro)
    est = meter.estimate()
    assert est.n_updates == steps
    assert est.grad_sq == pytest.approx(delta_sq, rel=0.15)
    assert est.b_simple == pytest.approx(true_b_simple, rel=0.12)


def test_two_batch_estimators_are_exact_on_expected_norms():
    g_sq, tr = 2.0, 300.0  # E|G_B|^2 = |G|^2 + tr(Σ)/B
    small, big = g_sq + tr / 8, g_sq + tr / 64
    assert true_grad_sq(small, big, 8, 64) == pytest.approx(g_sq)
    assert trace_sigma(small, big, 8, 64) == pytest.approx(tr)


def test_meter_smooths_before_dividing_and_waits_for_a_positive_grad_norm():
    meter = NoiseScaleMeter(ema_weight=0.5)
    est = meter.update([1.0], 8, 1.5, 16)  # |G|^2 estimate 2·1.5 − 1 = 2 > 0; S = (1 − 1.5)/(1/16) < 0
    assert est.b_simple is None
    with pytest.raises(ValueError):
        meter.update([1.0], 16, 1.0, 16)


def test_efficiencies_follow_mccandlish_and_pollux():
    assert step_efficiency(100, 100) == pytest.approx(0.5)
    assert sample_efficiency(100, 100) == pytest.approx(0.5)
    assert steps_ratio(100, 200, 100) == pytest.approx(1.5 / 2.0)
    assert pollux_efficiency(200, 100, 100) == pytest.approx(200 / 300)
    assert steps_ratio(10, 20, 10_000) == pytest.approx(0.5, rel=0.01)  # far below B_noise: half the steps


def test_grad_sq_norm_sums_all_parameter_gradients():
    model = torch.nn.Linear(3, 2)
    model(torch.ones(4, 3)).sum().backward()
    expected = sum(float((p.grad**2).sum()) for p in model.parameters())
    assert grad_sq_norm(model.parameters()) == pytest.approx(expected)
