"""A held-out (eval/validation) loss logged beside the training loss that rises: overfitting when the training loss
falls meanwhile, else a rise the training loss does not explain (a changed eval set, a shift in the data, eval-mode
bugs). The rule, its one home (``detect_eval_rise``; ``EvalRise.train_fell`` tells the two apart):

- the eval series has at least ``MIN_EVAL_POINTS`` finite points;
- its best point is the lowest running median of 3 eval points (one lucky eval does not set it), and at least
  ``MIN_POINTS_AFTER_BEST`` eval points follow it (a rise on the last eval alone is not a trend);
- the eval loss now (the median of its last 3 points) stands above the best by more than ``MIN_EVAL_RISE`` (2 %) of
  it and by more than 3 noise stds of the eval series (robust std of its point-to-point differences / √2): a rise
  that large and that lasting is not the wobble of one eval set;
- overfitting (``EvalRise.train_fell``): over the same steps the training loss's trend fell by more than
  ``MIN_TRAIN_FALL`` (1 %): the model keeps fitting its training data better while it does worse on held-out data.
  Where it did not (flat, or rising too), the eval loss still rose, and that is said too (``detect_eval_rise``):
  an eval loss up 50 % beside a flat training loss was not reported at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuwise.advise.data import Curve
from gpuwise.advise.smoothing import running_median

MEDIAN_EVALS = 3   # the best and the current eval loss are medians of this many eval points
MIN_EVAL_POINTS = 5
MIN_POINTS_AFTER_BEST = 3
MIN_EVAL_RISE = 0.02
MIN_TRAIN_FALL = 0.01


@dataclass(frozen=True)
class EvalRise:
    """The eval loss's rise since its best point, with the training trend over the same steps."""

    eval_name: str | None
    since_step: int           # the eval loss's best step: where to stop early
    best_eval_loss: float
    eval_loss_now: float      # median of the last MEDIAN_EVALS eval points
    last_eval_step: int
    last_eval_loss: float     # the eval loss logged at ``last_eval_step``
    train_trend_at_best: float
    train_trend_now: float    # the training trend at the last eval step

    @property
    def train_fell(self) -> bool:
        """Whether the training trend fell by more than ``MIN_TRAIN_FALL`` meanwhile: then the rise is overfitting."""
        return self.train_trend_at_best - self.train_trend_now > MIN_TRAIN_FALL * abs(self.train_trend_at_best)

    @property
    def eval_rise_fraction(self) -> float | None:
        """The eval loss now above its best, as a share of the best (0.5: 50 % higher); None for a best of 0."""
        return (self.eval_loss_now - self.best_eval_loss) / abs(self.best_eval_loss) if self.best_eval_loss else None

    def to_dict(self) -> dict:
        r = lambda x: float(f"{x:.6g}")   # noqa: E731
        return {"eval_series": self.eval_name, "since_step": self.since_step, "best_eval_step": self.since_step,
                "best_eval_loss": r(self.best_eval_loss), "eval_loss_now": r(self.eval_loss_now),
                "best_eval_loss_is": f"running median of {MEDIAN_EVALS} eval points, lowest",
                "eval_loss_now_is": f"median of the last {MEDIAN_EVALS} eval points",
                "last_eval_step": self.last_eval_step, "last_eval_loss": r(self.last_eval_loss),
                "train_trend_at_best_eval": r(self.train_trend_at_best),
                "train_trend_now": r(self.train_trend_now)}


def detect_eval_rise(train_steps: np.ndarray, train_trend: np.ndarray, eval_curve: Curve | None,
                     eval_name: str | None = None) -> EvalRise | None:
    """The module's rule for a rising eval loss, on a training trend (finite points, ascending steps) and the eval
    series, whatever the training loss did meanwhile; None when it does not hold or there is no eval series."""
    if eval_curve is None or len(train_steps) < 2:
        return None
    ok = np.isfinite(eval_curve.loss)
    steps, loss = eval_curve.steps[ok], eval_curve.loss[ok]
    inside = (steps >= train_steps[0]) & (steps <= train_steps[-1])   # where the training trend is known
    steps, loss = steps[inside], loss[inside]
    if len(steps) < MIN_EVAL_POINTS:
        return None
    smooth = running_median(loss, MEDIAN_EVALS)
    best = int(np.argmin(smooth))
    if len(steps) - 1 - best < MIN_POINTS_AFTER_BEST:
        return None
    low, now = float(smooth[best]), float(np.median(loss[-MEDIAN_EVALS:]))
    d = np.diff(loss)
    noise = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / np.sqrt(2.0)
    if now - low <= max(MIN_EVAL_RISE * abs(low), 3.0 * noise):
        return None
    at_best = float(np.interp(steps[best], train_steps, train_trend))
    at_end = float(np.interp(steps[-1], train_steps, train_trend))
    return EvalRise(eval_name, int(steps[best]), low, now, int(steps[-1]), float(loss[-1]), at_best, at_end)
