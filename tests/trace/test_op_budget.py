"""The tracer's operator budget: a trace that dispatches more operators than the budget stops with one
clear line (TraceError) instead of running on with memory growing."""

from __future__ import annotations

import pytest

from gpuwise.trace.records import TraceError
from gpuwise.trace.tracer import MAX_TRACE_OPS_ENV, trace_workload
from gpuwise.workload import Workload, WorkloadError

RESNET = Workload(model="torchvision:resnet18", batch_size=2, image_size=32, optimizer="sgd")


def test_a_trace_past_the_operator_budget_is_refused(monkeypatch):
    monkeypatch.setenv(MAX_TRACE_OPS_ENV, "200")  # resnet18's two steps dispatch about 1,000
    with pytest.raises(TraceError, match=r"dispatched more than 200 operators .*GPUWISE_TRACE_MAX_OPS"):
        trace_workload(RESNET)


def test_the_budget_from_the_environment_must_be_a_whole_number(monkeypatch):
    monkeypatch.setenv(MAX_TRACE_OPS_ENV, "lots")
    with pytest.raises(WorkloadError, match="GPUWISE_TRACE_MAX_OPS is 'lots'"):
        trace_workload(RESNET)

