"""Debiased exponential moving averages, and the noise of a curve around its trend.

The EMA is TensorBoard's (and Adam's): ``m_t = w·m_{t-1} + (1-w)·x_t`` started at 0, divided by
``1 - w^t`` so the first points are not pulled towards zero. A forward EMA lags the data by about
``w/(1-w)`` points, which would shift every phase boundary late; the trend used for analysis runs the
EMA forward and then backward over the result (zero phase lag, like ``scipy.signal.filtfilt``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def ema_debiased(x: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's smoothing. Non-finite points are skipped (they keep the previous value)."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"EMA weight must be in [0, 1), got {weight}")
    out = np.empty(len(x), dtype=float)
    m, count, last = 0.0, 0, np.nan
    for i, v in enumerate(np.asarray(x, dtype=float)):
        if np.isfinite(v):
            m = weight * m + (1.0 - weight) * v
            count += 1
            last = m / (1.0 - weight**count)
        out[i] = last
    return out


def ema_zero_phase(x: np.ndarray, weight: float) -> np.ndarray:
    """Forward then backward debiased EMA: a trend without lag (for finite ``x``).

    Near the first point the span is held to half the distance from it, so the window stays centred:
    a plain two-pass EMA would pull the steep first steps of a loss curve towards the later, lower values."""
    n = len(x)
    span = weight / (1.0 - weight) if weight > 0 else 0.0
    spans = np.minimum(span, np.arange(n) / 2.0)
    weights = spans / (spans + 1.0)
    forward = _ema_varying(np.asarray(x, dtype=float), weights)
    return _ema_varying(forward[::-1], weights[::-1])[::-1]


def _ema_varying(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """EMA with a weight per point, debiased by the running sum of the weights given to real data."""
    out = np.empty(len(x))
    m = norm = 0.0
    for i, (v, w) in enumerate(zip(x, weights)):
        m = w * m + (1.0 - w) * v
        norm = w * norm + (1.0 - w)
        out[i] = m / norm
    return out


def auto_weight(n_points: int, span_fraction: float = 0.02) -> float:
    """An EMA weight whose span is ``span_fraction`` of the curve (at least 1 point, at most 500).

    Why relative to the length: a log of 200 points and one of 200,000 need the same visual smoothness.
    """
    span = min(500.0, max(1.0, span_fraction * n_points))
    return 1.0 - 1.0 / (span + 1.0) if span > 1.0 else 0.0


@dataclass(frozen=True)
class NoiseLevel:
    """Noise of the raw loss around the trend, over the recent ``window_fraction`` of the finite curve.

    ``absolute_std``: robust std (1.4826·MAD) of loss − trend, in loss units; ``relative_std``: of
    loss/trend − 1 (0.1 = the loss swings ±10 % around its trend).
    """

    absolute_std: float
    relative_std: float
    window_start_step: int


MIN_NOISE_SPAN = 5.0   # points: the smoother the noise is measured around never follows single points


def noise_trend(loss: np.ndarray, weight: float, min_span: float = MIN_NOISE_SPAN) -> np.ndarray:
    """The trend the noise is measured around: the zero-phase EMA with a span of at least ``min_span``
    points. On a short log the analysis trend's span (2 % of the points) is under one point, so it equals
    the raw losses and their swings would vanish (a 30-step log swinging ±15 % read as ±0.0 %)."""
    span = weight / (1.0 - weight) if weight > 0 else 0.0
    if span >= min_span:
        return ema_zero_phase(loss, weight)
    return ema_zero_phase(loss, min_span / (min_span + 1.0))


def noise_level(steps: np.ndarray, loss: np.ndarray, trend: np.ndarray, window_fraction: float = 0.3) -> NoiseLevel:
    """``trend``: what the noise is measured around; pass ``noise_trend(...)``, not a trend that may equal
    the data."""
    n = len(loss)
    start = int(n * (1.0 - window_fraction)) if n >= 10 else 0
    resid = loss[start:] - trend[start:]
    scale = np.abs(trend[start:])
    rel = resid / np.where(scale > 1e-12, scale, np.nan)
    return NoiseLevel(absolute_std=_robust_std(resid), relative_std=_robust_std(rel[np.isfinite(rel)]),
                      window_start_step=int(steps[start]) if n else 0)


def _robust_std(x: np.ndarray) -> float:
    if len(x) == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def running_median(x: np.ndarray, width: int, chunk_points: int = 4096) -> np.ndarray:
    """Median of the ``width`` points centred on each point (fewer at the ends, where the window is cut). Unlike
    an EMA it ignores a few wild points, and a jump moves it only once it holds half the window: it does not
    carry a blow-up back in time. Memory: ``chunk_points × width`` floats at a time."""
    x = np.asarray(x, dtype=float)
    n, half = len(x), max(0, int(width) // 2)
    if n == 0 or half == 0:
        return x.copy()
    out = np.empty(n)
    for i in [*range(min(half, n)), *range(max(half, n - half), n)]:   # the cut windows at both ends
        out[i] = np.median(x[max(0, i - half): i + half + 1])
    if n > 2 * half:
        windows = np.lib.stride_tricks.sliding_window_view(x, 2 * half + 1)   # window k is centred on k + half
        for k0 in range(0, len(windows), chunk_points):
            part = windows[k0: k0 + chunk_points]
            out[half + k0: half + k0 + len(part)] = np.median(part, axis=1)
    return out
