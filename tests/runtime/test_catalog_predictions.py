"""Every catalog GPU gets a sane prediction for a real traced model (needs the tracer and catalog)."""

from __future__ import annotations

import math

import pytest

from gpuwise.runtime import predict_step_time
from gpuwise.workload import Workload


def _catalog_gpus():
    from gpuwise.catalog import load_catalog

    return load_catalog(user_file=False).gpus


def _trace(workload: Workload):
    from gpuwise.trace import trace_workload

    return trace_workload(workload)


@pytest.mark.slow
def test_every_catalog_gpu_predicts_a_real_resnet18_step():
    gpus = _catalog_gpus()
    tr = _trace(Workload(model="torchvision:resnet18", batch_size=16, precision="amp-fp16", optimizer="sgd"))
    results = {g.id: predict_step_time(tr, g) for g in gpus}
    for gid, st in results.items():
        assert math.isfinite(st.step_time_s) and st.step_time_s > 0, gid
        assert abs(sum(st.by_class_s.values()) - st.compute_s) < 1e-9 * st.compute_s
        assert st.by_class_s["conv"] > 0
    assert results["h100-sxm"].step_time_s < results["t4"].step_time_s   # both ids are the catalog's


def test_catalog_gpus_with_more_of_everything_are_never_slower_on_a_hand_made_step():
    from runtime_fakes import mlp_trace

    gpus = _catalog_gpus()
    tr = mlp_trace(256, width=2048, precision="amp-fp16")
    times = {g.id: predict_step_time(tr, g).step_time_s for g in gpus}
    keys = ("fp32", "fp16")
    compared = 0
    for a in gpus:
        for b in gpus:
            if a.peak("fp16") is None or b.peak("fp16") is None:
                continue
            dominates = (all(a.peak(k) >= b.peak(k) for k in keys) and a.memory_bandwidth_gbs >= b.memory_bandwidth_gbs
                         and a.peak("fp16") / a.sm_count >= b.peak("fp16") / b.sm_count
                         and a.tdp_w >= b.tdp_w and a.arch == b.arch)   # power: runtime/laws.PowerLevel
            if dominates and a is not b:
                assert times[a.id] <= times[b.id] * (1 + 1e-9), (a.id, b.id)
                compared += 1
    assert compared >= 10, "too few pairs of catalog GPUs where one has more of everything"
