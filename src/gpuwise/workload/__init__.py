"""A job's description: model spec, batch, input size, precision, optimizer, mode, PEFT, parallelism."""

from gpuwise.workload.model import (
    FINETUNES,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    QUANTS,
    SHARDINGS,
    Workload,
    WorkloadError,
)

__all__ = ["FINETUNES", "MODES", "OPTIMIZERS", "PRECISIONS", "QUANTS", "SHARDINGS", "Workload", "WorkloadError"]
