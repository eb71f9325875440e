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
