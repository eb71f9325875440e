"""plan: for each GPU × count × batch: fits?, step/job time, cost; the cheapest that meets the deadline."""

from gpuwise.plan.profile import (
    Estimate, fits, largest_fitting_batch, model_for, step_time_function, usable_bytes,
)
from gpuwise.plan.recommend import Constraints, JobSize, Option, PlanError, Recommendation, recommend

__all__ = [
    "Constraints", "Estimate", "JobSize", "Option", "PlanError", "Recommendation", "fits",
    "largest_fitting_batch", "model_for", "recommend", "step_time_function", "usable_bytes",
]
