"""plan: the one answer to "fits? how long? what does it cost?" for every GPU × count (DESIGN.md)."""

from gpuwise.plan.fit import DEFAULT_HEADROOM_FRACTION, fits, largest_fitting, parse_headroom, usable_bytes
from gpuwise.plan.offers import cheapest_offer, ranking_currency
from gpuwise.plan.profile import Estimate, largest_fitting_batch, model_for, step_time_function
from gpuwise.plan.quote import Quote, make_quote
from gpuwise.plan.recommend import Constraints, JobSize, Option, PlanError, Recommendation, recommend

__all__ = [
    "Constraints", "DEFAULT_HEADROOM_FRACTION", "Estimate", "JobSize", "Option",
    "PlanError", "Quote", "Recommendation", "cheapest_offer", "fits", "largest_fitting", "largest_fitting_batch",
    "make_quote", "model_for", "parse_headroom", "ranking_currency", "recommend", "step_time_function",
    "usable_bytes",
]
