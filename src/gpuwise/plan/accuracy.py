"""Where the shipped time model's measured error applies, and the range it gives around a prediction.

The held-out runs behind ``runtime/time_accuracy.json`` are traced CNN and transformer jobs timed by the
shipped model. So the range is given for a traced job's step time, and not for the LLM closed form (no
held-out run measures it), a step the input rate sets (the user's own figure), or a prediction the user's
calibration moved (the range describes the shipped model). estimate, recommend and report use this rule.
"""

from __future__ import annotations

from gpuwise.runtime.accuracy import TimeAccuracy, load_accuracy

__all__ = ["TimeAccuracy", "likely_job_time_range_s", "likely_step_time_range_s", "load_accuracy"]


def likely_step_time_range_s(step_time_s: float | None, *, method: str, bound: str | None = None,
                             calibrated: bool = False) -> tuple[float, float] | None:
    """Where 8 in 10 held-out public runs measured, given this prediction; None where that says nothing."""
    accuracy = load_accuracy()
    if accuracy is None or not step_time_s or method != "traced" or bound == "input" or calibrated:
        return None
    return accuracy.likely_range_s(step_time_s)


def likely_job_time_range_s(quote, method: str) -> tuple[float, float] | None:
    """The same range around one of recommend's options' job time (a quote that fits, with a time)."""
    if not quote.fits or not quote.total_time_s:
        return None
    return likely_step_time_range_s(quote.total_time_s, method=method, bound=quote.bound,
                                    calibrated=bool(quote.calibration))
