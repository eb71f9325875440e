"""A job's description: model spec, batch, input size, precision, optimizer, mode, PEFT, parallelism."""

from gpuwise.workload.model import (
    ATTENTIONS,
    ENGINES,
    OPTIMIZER_IMPLS,
    FINETUNES,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    QUANTS,
    SHARDINGS,
    Workload,
    WorkloadError,
)

__all__ = ["ATTENTIONS", "ENGINES", "OPTIMIZER_IMPLS", "FINETUNES", "MODES", "OPTIMIZERS", "PRECISIONS", "QUANTS", "SHARDINGS", "Workload", "WorkloadError"]
