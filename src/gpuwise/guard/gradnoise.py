"""Raw measurements for the gradient noise scale, collected for free while accumulating micro-batches.

McCandlish et al. (2018, "An Empirical Model of Large-Batch Training", appendix A) estimate the critical
batch size from squared gradient norms at two batch sizes: |G_small|^2 at B_small and |G_big|^2 at B_big.
Micro-batch accumulation already computes both: each micro-batch's gradient (B_small = its samples) and the
accumulated, all-reduced gradient (B_big = the global batch). The guard logs the raw numbers to the run log
(``grad_sq_norm_small``, ``grad_sq_norm_big``, ``noise_b_small``, ``noise_b_big``); ``gpuwise advise`` turns
them into the noise scale. The per-micro-batch norm is the change of the accumulated gradient, so it costs
one extra copy of the gradients, only on steps that measure.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GradNoiseSample:
    step: int
    grad_sq_norm_small: float   # mean over micro-batches of |g_micro|^2 (g of that micro-batch's mean loss)
    grad_sq_norm_big: float     # |g|^2 of the whole (global) batch's mean loss
    b_small: float              # mean samples per micro-batch (per rank)
    b_big: int                  # samples per optimizer step over all ranks

    def as_metrics(self) -> dict[str, float]:
        return {"grad_sq_norm_small": self.grad_sq_norm_small, "grad_sq_norm_big": self.grad_sq_norm_big,
                "noise_b_small": self.b_small, "noise_b_big": float(self.b_big)}


class MicroGradTracker:
    """Squared norms of each micro-batch's own gradient, from the running accumulated gradient."""

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        self.params = params
        self._previous: dict[int, torch.Tensor] = {}
        self.sq_norms: list[float] = []
        self.sizes: list[int] = []

    def after_backward(self, weight: float, n_samples: int, loss_scale: float, last: bool) -> None:
        """``weight``: the factor the micro-batch's mean loss was multiplied by before backward."""
        diffs = []
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            prev = self._previous.get(i)
            diffs.append(p.grad.detach() if prev is None else p.grad.detach() - prev)
        if diffs:
            norms = torch._foreach_norm(diffs)
            sq = float(torch.stack([n.float() for n in norms]).pow(2).sum())
        else:
            sq = 0.0
        self.sq_norms.append(sq / (weight * weight * loss_scale * loss_scale))
        self.sizes.append(n_samples)
        if not last:
            self._previous = {i: p.grad.detach().clone() for i, p in enumerate(self.params) if p.grad is not None}
        else:
            self._previous = {}

    def sample(self, step: int, big_sq_norm: float, b_big: int) -> GradNoiseSample | None:
        if not self.sq_norms:
            return None
        small = sum(self.sq_norms) / len(self.sq_norms)
        b_small = sum(self.sizes) / len(self.sizes)
        if not (b_small < b_big) or not all(map(_finite, (small, big_sq_norm))):
            return None  # one batch size, or an AMP step with inf/nan gradients: nothing to estimate from
        return GradNoiseSample(step, small, big_sq_norm, b_small, b_big)


def _finite(x: float) -> bool:
    return x == x and x not in (float("inf"), float("-inf"))
