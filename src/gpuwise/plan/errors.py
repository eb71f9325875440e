"""The plan part's one error type: bad input to a fit, price or recommendation question (exit 2)."""

from gpuwise.errors import GpuwiseError


class PlanError(GpuwiseError):
    pass
