"""DDP under gradient accumulation: the last micro-step's gradients are ready when backward completes each of
them, as without accumulation, so the all-reduce overlaps backward the same way (one all-reduce a step)."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime import predict_step_time
from gpuwise.runtime.comm import gradients_from_trace
from gpuwise.trace import trace_workload
from gpuwise.workload import Workload


@pytest.fixture(scope="module")
def traces():
    def trace(**kwargs):
        return trace_workload(Workload(model="torchvision:resnet18", batch_size=8, optimizer="momentum", **kwargs))
    return {"one": trace(), "accumulating": trace(grad_accum_steps=2), "kept": trace(keep_grads=True)}


def _ready(trace):
    backward = [1.0 for op in trace.ops if op.phase == "backward"]
    return gradients_from_trace(trace, backward)


@pytest.mark.parametrize("kind", ["accumulating", "kept"])
def test_gradients_kept_from_an_earlier_micro_step_are_ready_where_backward_completes_them(traces, kind):
    first = _ready(traces["one"])
    later = _ready(traces[kind])
    assert later is not None
    assert sum(g.size_bytes for g in later) == traces[kind].trainable_param_count * 4   # every fp32 gradient
    assert len(later) == len(first)
    # a few ops apart at most (the first micro-step's detach sits elsewhere than a later one's add_), of 160
    assert [g.at_fraction for g in later] == pytest.approx([g.at_fraction for g in first], abs=0.03)


def test_ddp_exposes_the_same_all_reduce_with_or_without_accumulation():
    gpu = resolve_gpu(load_catalog(user_file=False), "rtx-4090")
    steps = {accum: predict_step_time(trace_workload(Workload(model="torchvision:resnet50", batch_size=16,
                                                              optimizer="momentum", grad_accum_steps=accum)),
                                      gpu, count=8)
             for accum in (1, 4)}
    assert steps[1].communication_s > 0
    assert steps[4].communication_s == pytest.approx(steps[1].communication_s, rel=0.05)
