"""Time on another GPU for a measured run: the one model, used by ``report`` and ``advise`` alike.

A measured run gives its time on the GPU it ran on. On another GPU, the part of the time the GPU
was busy scales by a ratio of step times; the idle part (data loading, CPU work, waiting) stays::

    time there = time here × ((1 − busy) + busy × ratio(here → there))

The ratio comes from the runtime's per-operator predictor when the workload is known (``--model``:
predicted step time there / predicted step time here, so the measurement stays the anchor), and
otherwise from the one datasheet ratio of ``gpuwise.runtime.rates`` — and the output says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpuwise.catalog.model import GPU
from gpuwise.plan.errors import PlanError
from gpuwise.plan.profile import step_time_function
from gpuwise.runtime.rates import DATASHEET_METHOD, datasheet_time_ratio
from gpuwise.workload import Workload

PREDICTED_METHOD = "time predictor"


@dataclass(frozen=True)
class TimeScaling:
    """How many times longer a busy second of the run takes on another GPU."""

    method: str                                   # PREDICTED_METHOD or DATASHEET_METHOD
    basis: str                                    # in words, for the output
    precision: str
    step_time_s: Callable[[GPU], "float | None"] | None = field(default=None, compare=False, repr=False)

    def ratio(self, gpu_from: GPU, gpu_to: GPU) -> float | None:
        """Step time on ``gpu_to`` / step time on ``gpu_from``; None where the job cannot run on ``gpu_to``."""
        if gpu_from.id == gpu_to.id:
            return 1.0
        if self.step_time_s is not None:
            t_from, t_to = self.step_time_s(gpu_from), self.step_time_s(gpu_to)
            if not t_from or t_to is None:
                return None
            return t_to / t_from
        return datasheet_time_ratio(gpu_from, gpu_to, self.precision)

    def run_time_factor(self, busy_share: float, gpu_from: GPU, gpu_to: GPU) -> float | None:
        """Wall time there / wall time here: the idle share stays, the busy share scales."""
        return busy_time_factor(busy_share, self.ratio(gpu_from, gpu_to))


def busy_time_factor(busy_share: float, ratio: float | None) -> float | None:
    """Wall time there / wall time here for a run busy ``busy_share`` of the time whose busy seconds
    take ``ratio`` times as long there (None: cannot run there): the module docstring's one rule."""
    if not 0.0 <= busy_share <= 1.0:
        raise PlanError(f"busy share must be in [0, 1], got {busy_share!r}")
    return None if ratio is None else (1.0 - busy_share) + busy_share * ratio


def time_scaling(precision: str, workload: Workload | None = None,
                 progress: Callable[[str], None] | None = None, *, correction=None) -> TimeScaling:
    """The predictor's ratios for ``workload`` when given (one trace, or none for LLMs; ``correction``:
    the user's calibration, ``plan.profile.model_for``), else datasheets."""
    if workload is not None:
        basis = (f"predicted step times of {workload.model} (batch {workload.batch_size}, {workload.precision}) "
                 f"on each GPU")
        return TimeScaling(PREDICTED_METHOD, basis, workload.precision, step_time_function(workload, progress, correction=correction))
    return TimeScaling(DATASHEET_METHOD, f"{precision} peak rates and memory bandwidth from the catalog", precision)
