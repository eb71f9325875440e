"""When the job's workload is known, time on other GPUs comes from the time predictor, not from the
ratio of peak rates: one trace, then a step time per catalog GPU (cached)."""

from __future__ import annotations

from gpuwise.catalog.model import GPU
from gpuwise.workload import Workload


def predicted_step_time(workload: Workload):
    """A function GPU -> predicted step time (s) of ``workload``, or None where it cannot run there."""
    from gpuwise.plan import model_for

    model = model_for(workload)
    cache: dict[str, float | None] = {}

    def step_time_s(gpu: GPU) -> float | None:
        if gpu.id not in cache:
            if workload.precision == "amp-bf16" and not gpu.has_bf16:
                cache[gpu.id] = None
            else:
                est = model.estimate(gpu, count=workload.num_gpus)
                cache[gpu.id] = est.time.step_time_s if est.time is not None else None
        return cache[gpu.id]

    return step_time_s


def method_label(workload: Workload) -> str:
    return f"time predictor ({workload.model}, batch {workload.batch_size}, {workload.precision})"
