"""The plan part's one error type: bad input to a fit, price or recommendation question (exit 2)."""

from gpuwise.errors import GpuwiseError


class PlanError(GpuwiseError):
    """Bad input to the plan part, in one line: a headroom, deadline or budget out of range, a GPU count the job
    cannot be split over, a job a GPU cannot run, no option that meets the constraints. The CLI exits 2 with it."""
