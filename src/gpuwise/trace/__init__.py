"""gpuwise.trace: one real step of a real model on fake tensors, recorded op by op.

``trace_workload(workload) -> Trace`` is the entry point; records.py is the contract with
``memory`` and ``runtime``. It checks the model name first and looks in the on-disk cache
(trace/cache.py) before importing torch, so a typo or a repeated question costs no torch import.
"""

import contextlib
import sys

from gpuwise.trace import cache
from gpuwise.trace.records import CATEGORIES, PHASES, MemoryEvent, ModelCodeError, OpRecord, Trace, TraceError
from gpuwise.workload import Workload
from gpuwise.workload.specs import resolve_model_spec

__all__ = ["CATEGORIES", "PHASES", "MemoryEvent", "ModelCodeError", "OpRecord", "Trace", "TraceError", "trace_workload"]


def trace_workload(workload: Workload, *, use_cache: bool = True) -> Trace:
    """Traces one workload (see gpuwise.trace.tracer.trace_workload), through the trace cache
    (``use_cache`` False, ``--no-cache`` or ``GPUWISE_NO_CACHE=1``: traced again, nothing stored).

    Raises WorkloadError for an unknown model before torch is imported.
    """
    if not isinstance(workload, Workload):
        raise TraceError(f"trace_workload takes a gpuwise.workload.Workload, got {type(workload).__name__}")
    spec = resolve_model_spec(workload.model)
    key = cache.trace_key(workload, spec) if use_cache and cache.enabled() else None
    if key is not None:
        hit = cache.load(key, workload)
        if hit is not None:
            return hit
    from gpuwise.trace.tracer import trace_workload as _trace   # imports torch: seconds

    loaded = set(sys.modules)
    reads = cache.opened_files() if key is not None and spec.source == "file" else contextlib.nullcontext(set())
    with reads as opened:
        trace = _trace(workload)
    if key is not None:
        new = {name: sys.modules[name] for name in set(sys.modules) - loaded} if spec.source == "file" else {}
        cache.store(key, trace, cache.user_sources(new, opened))
    return trace
