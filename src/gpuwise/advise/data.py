"""What the readers hand to the analysis: a loss curve, optional gradient-noise samples, and run facts.

Arrays are numpy (read-only views) inside frozen dataclasses; ``eq=False`` because arrays do not
compare to a single bool. Steps are optimizer steps, increasing, one point per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from gpuwise.advise import wall_times


def _frozen(a: np.ndarray | None, dtype: type) -> np.ndarray | None:
    if a is None:
        return None
    out = np.array(a, dtype=dtype)
    out.setflags(write=False)
    return out


SKIPPED_LISTED = 20   # the first skipped (NaN/inf) steps kept and listed; the count is of all


@dataclass(frozen=True, eq=False)
class NonFiniteTally:
    """The NaN/inf losses of a log, in memory that does not grow with it (``failures.NonFiniteCounter`` counts a
    log's rows as read, before any thinning; ``failures.nonfinite_tally`` a curve's points).

    ``nan_step``: the first step of the NaN/inf losses the log ends on (the run never recovered: it diverged), None
    when it ends on a finite loss; ``skipped_count``: the NaN/inf losses that finite ones follow (steps the run
    skipped and recovered from: fp16 loss scaling skips a step whose gradients overflow); ``skipped_steps``: the
    first of those steps, ascending, at most ``SKIPPED_LISTED``."""

    nan_step: int | None
    skipped_count: int
    skipped_steps: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "skipped_steps", _frozen(np.asarray(self.skipped_steps, dtype=np.int64), np.int64))


@dataclass(frozen=True, eq=False)
class Curve:
    """A training-loss curve. ``loss`` may hold NaN/inf (that is a finding, not an error).

    ``t_s``: wall time of each point in seconds (any origin), ``None`` when the log has none.
    ``lr`` and ``batch_size``: per point, NaN where not logged; ``None`` when never logged.
    ``nonfinite``: where a reader thinned the curve, its tally of the NaN/inf losses of every row read (the analysis
    reads the NaN/inf steps from it, not from the thinned points); None: the points are every row.
    """

    steps: np.ndarray
    loss: np.ndarray
    t_s: np.ndarray | None = None
    lr: np.ndarray | None = None
    batch_size: np.ndarray | None = None
    source: str = ""
    nonfinite: NonFiniteTally | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", _frozen(self.steps, np.int64))
        object.__setattr__(self, "loss", _frozen(self.loss, np.float64))
        for name in ("t_s", "lr", "batch_size"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.float64))
        n = len(self.steps)
        for name in ("loss", "t_s", "lr", "batch_size"):
            a = getattr(self, name)
            if a is not None and len(a) != n:
                raise ValueError(f"Curve.{name} has {len(a)} points, steps has {n}")

    def __len__(self) -> int:
        return len(self.steps)

    def step_time_s(self) -> float | None:
        """Wall seconds per optimizer step from the logged times (``wall_times.step_time_s``: between the rows that
        end a group written together, at the steady pace, robust to pauses and restarts); None without times."""
        return None if self.t_s is None else wall_times.step_time_s(self.steps, self.t_s)

    def last_batch_size(self) -> float | None:
        if self.batch_size is None:
            return None
        finite = self.batch_size[np.isfinite(self.batch_size)]
        return float(finite[-1]) if len(finite) else None


@dataclass(frozen=True, eq=False)
class GradNoiseSamples:
    """Per-step squared gradient norms at two batch sizes (McCandlish et al. 2018, appendix A).

    ``g_small_sq[i]``: |G|^2 of the gradient of the mean loss over ``b_small[i]`` samples (a micro-batch
    or one rank's share); ``g_big_sq[i]``: the same over ``b_big[i]`` samples (the whole step).
    """

    steps: np.ndarray
    g_small_sq: np.ndarray
    g_big_sq: np.ndarray
    b_small: np.ndarray
    b_big: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", _frozen(self.steps, np.int64))
        for name in ("g_small_sq", "g_big_sq", "b_small", "b_big"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.float64))

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(frozen=True, eq=False)
class TrainingLog:
    """Everything a reader found: the curve, gradient-noise samples, and run facts.

    ``gpu_name``: the GPU the run used (NVML name or catalog id) when the log says; ``peak_memory_bytes``:
    the most GPU memory the process held, when the log has samples; ``meta``: the raw run-log meta;
    ``loss_name``: the series the curve is, ``other_loss_names``: the other loss-like ones (say which was used);
    ``eval_curve``: a held-out (eval/validation) loss logged beside the training loss, named ``eval_name`` (the
    overfitting check); ``rows_read`` and ``thinned_bin_steps``: a long log thinned on read, from ``rows_read``
    rows with a loss to one point per ``thinned_bin_steps`` steps (1: not thinned); ``workload``: the job a gpuwise
    run log records (meta ``workload``, as ``gpuwise run --model`` and the guard's ``workload=`` write it), None
    when it records none.
    """

    curve: Curve
    noise: GradNoiseSamples | None = None
    gpu_name: str | None = None
    gpu_count: int = 1
    peak_memory_bytes: int | None = None
    precision: str | None = None
    meta: Mapping[str, str] = field(default_factory=dict)
    loss_name: str | None = None             # the column, tag or metric the loss was read from
    other_loss_names: tuple[str, ...] = ()   # the log's other loss-like series, not used
    eval_curve: Curve | None = None          # a held-out loss beside the training loss
    eval_name: str | None = None
    rows_read: int | None = None             # rows with a loss read (None: not counted by the reader)
    thinned_bin_steps: int = 1               # > 1: thinned on read to one point per this many steps
    workload: Mapping[str, object] | None = None   # the workload= a gpuwise run log records (Workload.to_dict())
