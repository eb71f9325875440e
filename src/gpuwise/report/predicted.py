"""When the job's workload is known, time on other GPUs comes from the time predictor, not from the
ratio of peak rates (``gpuwise.plan.step_time_function``: one trace, a step time per GPU)."""

from __future__ import annotations

from gpuwise.workload import Workload


def predicted_step_time(workload: Workload):
    """A function GPU -> predicted step time (s) of ``workload``, or None where it cannot run there."""
    from gpuwise.plan import step_time_function

    return step_time_function(workload)


def method_label(workload: Workload) -> str:
    return f"time predictor ({workload.model}, batch {workload.batch_size}, {workload.precision})"
