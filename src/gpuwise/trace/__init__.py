"""gpuwise.trace: one real step of a real model on fake tensors, recorded op by op.

``trace_workload(workload) -> Trace`` is the entry point; records.py is the contract with
``memory`` and ``runtime``.
"""

from gpuwise.trace.records import CATEGORIES, PHASES, MemoryEvent, OpRecord, Trace, TraceError

__all__ = ["CATEGORIES", "PHASES", "MemoryEvent", "OpRecord", "Trace", "TraceError", "trace_workload"]


def trace_workload(workload):
    """Traces one workload; see gpuwise.trace.tracer.trace_workload (imported lazily: torch is heavy)."""
    from gpuwise.trace.tracer import trace_workload as _trace

    return _trace(workload)
