"""The workload part's one error type: a job description, model spec or model config gpuwise cannot use (exit 2)."""

from gpuwise.errors import GpuwiseError


class WorkloadError(GpuwiseError):
    pass
