"""The gradient noise scale (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", app. A).

From the squared norm of the gradient of the mean loss at two batch sizes (``B_small`` < ``B_big``):

    |G|^2 ≈ (B_big·|G_big|^2 − B_small·|G_small|^2) / (B_big − B_small)    (unbiased for the true |G|^2)
    S     ≈ (|G_small|^2 − |G_big|^2) / (1/B_small − 1/B_big)              (unbiased for tr Σ)
    B_simple = S / |G|^2

because E|G_B|^2 = |G|^2 + tr(Σ)/B. Single-step estimates are very noisy (|G|^2 can come out
negative), so both are smoothed with a debiased EMA *before* dividing, as the paper advises.
B_simple approximates the critical batch size B_crit: above it, a larger batch buys little.

The two sizes come almost free: micro-batches within a step (B_small = micro-batch, B_big = the
whole accumulated step) or DDP ranks (each rank's local gradient before the all-reduce, and after).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpuwise.advise.data import GradNoiseSamples


def true_grad_sq(g_small_sq: float, g_big_sq: float, b_small: float, b_big: float) -> float:
    return (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)


def trace_sigma(g_small_sq: float, g_big_sq: float, b_small: float, b_big: float) -> float:
    return (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)


def step_efficiency(batch: float, b_noise: float) -> float:
    """Progress per step at ``batch`` relative to an infinite batch: S_min/S = 1/(1 + B_noise/B)."""
    return 1.0 / (1.0 + b_noise / batch)


def sample_efficiency(batch: float, b_noise: float) -> float:
    """Progress per sample at ``batch`` relative to a tiny batch: E_min/E = 1/(1 + B/B_noise)."""
    return 1.0 / (1.0 + batch / b_noise)


def pollux_efficiency(batch: float, base_batch: float, b_noise: float) -> float:
    """Pollux (Qiao et al., OSDI 2021) statistical efficiency of ``batch`` relative to ``base_batch``:
    (B_noise + B_0)/(B_noise + B), the progress per sample kept when the batch grows. Goodput =
    throughput (samples/s) × this."""
    return (b_noise + base_batch) / (b_noise + batch)


def steps_ratio(batch_from: float, batch_to: float, b_noise: float) -> float:
    """Steps needed at ``batch_to`` over steps at ``batch_from`` for the same progress: (1+B_n/B_to)/(1+B_n/B_from)."""
    return (1.0 + b_noise / batch_to) / (1.0 + b_noise / batch_from)


@dataclass(frozen=True)
class NoiseScaleEstimate:
    """Smoothed estimates after ``n_updates`` steps. ``b_simple`` is None until |G|^2 comes out positive."""

    grad_sq: float
    trace_sigma: float
    b_simple: float | None
    n_updates: int
    b_small: float
    b_big: float

    def to_dict(self) -> dict:
        return {"b_simple": None if self.b_simple is None else round(self.b_simple, 3),
                "critical_batch_size": None if self.b_simple is None else round(self.b_simple, 3),
                "grad_sq_norm": self.grad_sq, "trace_sigma": self.trace_sigma, "n_updates": self.n_updates,
                "b_small": self.b_small, "b_big": self.b_big}


class NoiseScaleMeter:
    """A hook for a plain training loop (or gpuwise.guard) that keeps the smoothed noise scale.

    >>> meter = NoiseScaleMeter()
    >>> # per optimizer step, with k micro-batches of 8 samples each accumulated into one step of 8k:
    >>> est = meter.update([g1_sq, g2_sq], 8, step_grad_sq_norm, 16)   # doctest: +SKIP

    ``micro_grad_sq_norms``: |g|^2 of the gradient of the *mean* loss over each micro-batch (undo the
    1/k scaling of accumulation; with accumulation the first micro-batch's gradient is the one that is
    free to read, before the second backward adds to it). ``step_grad_sq_norm``: |g|^2 of the whole
    step's mean-loss gradient (after accumulation or the DDP all-reduce). Log what it saw through
    ``RunLog.log_train(step, **meter.log_fields(...))`` so ``gpuwise advise`` can read it back.
    """

    def __init__(self, ema_weight: float = 0.95) -> None:
        if not 0.0 <= ema_weight < 1.0:
            raise ValueError(f"ema_weight must be in [0, 1), got {ema_weight}")
        self.ema_weight = ema_weight
        self._g_ema = 0.0
        self._s_ema = 0.0
        self._n = 0
        self._b_small = 0.0
        self._b_big = 0.0

    def update(self, micro_grad_sq_norms: Sequence[float] | float, micro_batch: float, step_grad_sq_norm: float,
               step_batch: float) -> NoiseScaleEstimate:
        smalls = [float(micro_grad_sq_norms)] if np.isscalar(micro_grad_sq_norms) else [float(x) for x in micro_grad_sq_norms]
        if not smalls or step_batch <= micro_batch:
            raise ValueError(f"need micro-batch norms and step_batch ({step_batch}) > micro_batch ({micro_batch})")
        g_small = float(np.mean(smalls))
        g = true_grad_sq(g_small, step_grad_sq_norm, micro_batch, step_batch)
        s = trace_sigma(g_small, step_grad_sq_norm, micro_batch, step_batch)
        if np.isfinite(g) and np.isfinite(s):
            w = self.ema_weight
            self._g_ema = w * self._g_ema + (1.0 - w) * g
            self._s_ema = w * self._s_ema + (1.0 - w) * s
            self._n += 1
        self._b_small, self._b_big = float(micro_batch), float(step_batch)
        return self.estimate()

    def estimate(self) -> NoiseScaleEstimate:
        debias = 1.0 - self.ema_weight**self._n if self._n else 1.0
        g, s = self._g_ema / debias, self._s_ema / debias
        return NoiseScaleEstimate(grad_sq=g, trace_sigma=s, b_simple=s / g if g > 0 and s > 0 else None,
                                  n_updates=self._n, b_small=self._b_small, b_big=self._b_big)

    @staticmethod
    def log_fields(micro_grad_sq_norm: float, micro_batch: float, step_grad_sq_norm: float,
                   step_batch: float) -> dict[str, float]:
        """The run-log metric names ``gpuwise advise`` reads back (one row per step)."""
        return {"grad_sq_norm_small": micro_grad_sq_norm, "grad_sq_norm_big": step_grad_sq_norm,
                "noise_b_small": micro_batch, "noise_b_big": step_batch}


def grad_sq_norm(parameters) -> float:
    """Sum of squared gradient entries over ``parameters`` (torch tensors), as a float (one sync)."""
    import torch

    grads = [p.grad.detach() for p in parameters if getattr(p, "grad", None) is not None]
    if not grads:
        return 0.0
    return float(torch.stack([torch.sum(g.float() ** 2) for g in grads]).sum())


def estimate_from_samples(samples: GradNoiseSamples, ema_weight: float = 0.95) -> tuple[NoiseScaleEstimate, np.ndarray]:
    """Replays logged samples through a meter: (the final estimate, B_simple after each step, NaN before
    it is defined)."""
    meter = NoiseScaleMeter(ema_weight)
    history = np.full(len(samples), np.nan)
    for i in range(len(samples)):
        est = meter.update([samples.g_small_sq[i]], samples.b_small[i], samples.g_big_sq[i], samples.b_big[i])
        if est.b_simple is not None:
            history[i] = est.b_simple
    return meter.estimate(), history


@dataclass(frozen=True, eq=False)
class NoiseScaleSummary:
    """The noise scale of a run against its batch size, with what doubling the batch would buy."""

    estimate: NoiseScaleEstimate
    batch_size: float
    history_steps: np.ndarray
    history_b_simple: np.ndarray

    @property
    def b_noise(self) -> float | None:
        return self.estimate.b_simple

    def to_dict(self) -> dict:
        out = self.estimate.to_dict()
        out["batch_size"] = self.batch_size
        b = self.b_noise
        if b is not None:
            out.update({
                "batch_over_noise_scale": round(self.batch_size / b, 4),
                "step_efficiency": round(step_efficiency(self.batch_size, b), 4),
                "sample_efficiency": round(sample_efficiency(self.batch_size, b), 4),
                "double_batch": {"batch_size": 2 * self.batch_size,
                                 "steps_ratio": round(steps_ratio(self.batch_size, 2 * self.batch_size, b), 4),
                                 "pollux_efficiency": round(pollux_efficiency(2 * self.batch_size, self.batch_size, b), 4)},
            })
        return out


def summarise(samples: GradNoiseSamples, batch_size: float | None = None, ema_weight: float = 0.95) -> NoiseScaleSummary:
    """``batch_size``: the run's batch per optimizer step (default: the last logged B_big)."""
    est, history = estimate_from_samples(samples, ema_weight)
    batch = float(batch_size) if batch_size else float(samples.b_big[-1])
    return NoiseScaleSummary(est, batch, samples.steps, history)
