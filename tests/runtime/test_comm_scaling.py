"""Scaling invariants of the step-time predictor over every catalog GPU: more GPUs of one node never lower
the throughput, more nodes never shorten a step, and the links decide how well a system scales."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.runtime.predict import predict_step_time

from runtime_fakes import mlp_trace

# A compute-heavy step, a communication-heavy one (big gradients, small batch), and one in between.
TRACES = {"compute": mlp_trace(2048, width=1024), "comm": mlp_trace(8, width=4096, layers=8),
          "mid": mlp_trace(128, width=2048, precision="amp-fp16")}


@pytest.fixture(scope="module")
def gpus():
    return load_catalog(user_file=False).gpus


@pytest.mark.parametrize("kind", sorted(TRACES))
def test_one_more_gpu_in_the_node_never_lowers_throughput(gpus, kind):
    # From 2 GPUs on: the all-reduce's bytes per GPU grow as (n-1)/n, the samples as n. (From 1 to 2 a
    # whole all-reduce appears: a communication-bound job can be slower on 2, see the next test.)
    trace = TRACES[kind]
    for gpu in gpus:
        rates = [predict_step_time(trace, gpu, count=n).samples_per_s for n in range(2, 9)]
        for n, (a, b) in enumerate(zip(rates, rates[1:]), start=2):
            assert b >= a * (1 - 1e-9), f"{gpu.id}: {n + 1} GPUs {b:.1f}/s < {n} GPUs {a:.1f}/s ({kind})"


def test_a_communication_bound_job_can_be_slower_on_two_pcie_gpus_than_on_one(gpus):
    t4 = next(g for g in gpus if g.id == "t4")
    one, two = (predict_step_time(TRACES["comm"], t4, count=n) for n in (1, 2))
    assert two.samples_per_s < one.samples_per_s and two.bound == "communication"
    compute = [predict_step_time(TRACES["compute"], t4, count=n).samples_per_s for n in (1, 2)]
    assert compute[1] > 1.5 * compute[0]


@pytest.mark.parametrize("kind", sorted(TRACES))
def test_more_nodes_never_shorten_a_step_at_the_same_per_gpu_batch(gpus, kind):
    trace = TRACES[kind]
    for gpu in gpus:
        steps = [predict_step_time(trace, gpu, count=n).step_time_s for n in (8, 16, 32, 64)]
        assert steps == sorted(steps), f"{gpu.id}: {steps}"


def test_sixteen_geforce_cards_are_not_faster_per_step_than_eight(gpus):
    # The old model linked every GPU beyond 8 by 200 Gb/s InfiniBand: 16x RTX 4090 came out faster.
    rtx4090 = next(g for g in gpus if g.id == "rtx-4090")
    trace = TRACES["comm"]
    eight, sixteen = (predict_step_time(trace, rtx4090, count=n) for n in (8, 16))
    assert sixteen.step_time_s > eight.step_time_s
    assert any("assumed" in w for w in sixteen.warnings)


def test_the_pcie_a100_scales_worse_than_the_sxm_a100(gpus):
    by_id = {g.id: g for g in gpus}
    trace = TRACES["mid"]

    def speedup(gid):
        one, eight = (predict_step_time(trace, by_id[gid], count=n) for n in (1, 8))
        return eight.samples_per_s / one.samples_per_s

    assert speedup("a100-80gb-pcie") < speedup("a100-80gb-sxm4") <= 8
    assert speedup("h100-pcie") < speedup("h100-sxm") <= 8
