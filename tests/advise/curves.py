"""Synthetic loss curves with known answers, shared by the advise tests."""

from __future__ import annotations

import numpy as np

from gpuwise.advise.data import Curve

STEPS = np.arange(0, 1000)


def power_law(n: int = 1000, noise: float = 0.03, seed: int = 0, a: float = 1.5, b: float = 4.0, c: float = 0.4):
    rng = np.random.default_rng(seed)
    s = np.arange(0, n)
    return s, a + b * (s + 1.0) ** -c + rng.normal(0, noise, n)


def plateau_after(step: int = 300, n: int = 1000, seed: int = 0):
    """Exponential descent that is flat (within noise) from ``step`` on."""
    rng = np.random.default_rng(seed)
    s = np.arange(0, n)
    clean = 0.5 + 2.0 * np.exp(-np.minimum(s, step) / 60.0)
    return s, clean + rng.normal(0, 0.02, n)


def curve(steps, loss, **kw) -> Curve:
    return Curve(steps=steps, loss=loss, **kw)


def towards_zero(n: int = 800, flat_from: int = 350, sigma: float = 0.3, seed: int = 0):
    """A loss heading for ~0 (cross-entropy on learnable data) with multiplicative minibatch noise: by
    ``flat_from`` it has lost 99 % of its start and looks flat, though it still halves every ~doubling."""
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1)
    clean = 0.012 + 2.3 * np.exp(-s * 5.0 / flat_from)
    return s, clean * np.exp(rng.normal(0, sigma, n))


def power_law_flat_after(step: int = 300, n: int = 1000, noise: float = 0.1, seed: int = 0):
    """A power-law descent (5 -> 1.1) that stops at ``step``, with additive noise of ``noise``."""
    rng = np.random.default_rng(seed)
    s = np.arange(0, n)
    return s, 1.0 + 4.0 * (np.minimum(s, step) + 1.0) ** -0.6 + rng.normal(0, noise, n)
