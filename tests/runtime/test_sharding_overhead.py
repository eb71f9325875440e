"""The weak-scaling floor is its own part of a data-parallel step, not communication (issue 24): ZeRO-2/3/FSDP
on NVLink GPUs gave one step time for N = 1, 2, 4, 8 and called the optimizer time N GPUs save
"communication (exposed)". The step is unchanged; the links' estimate is communication, the floor's excess is
``sharding_overhead_s`` ("sharding overhead (speed-up <= N)"), and the parts sum to the step."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime.comm import weak_scaling_parts
from gpuwise.runtime.model import SHARDING_OVERHEAD_PART
from gpuwise.runtime.predict import predict_step_time
from gpuwise.workload import Workload

from runtime_fakes import mlp_trace


def _parts_sum(t) -> float:
    return sum(t.by_class_s.values()) + t.communication_s + t.sharding_overhead_s


def test_the_floor_adds_only_what_the_links_leave_of_the_saving():
    parts = weak_scaling_parts(0.1, sharded_compute_s=1.0, one_gpu_compute_s=1.5)
    assert (parts.communication_s, parts.sharding_overhead_s) == (0.1, pytest.approx(0.4))
    slow_links = weak_scaling_parts(0.6, sharded_compute_s=1.0, one_gpu_compute_s=1.5)
    assert (slow_links.communication_s, slow_links.sharding_overhead_s) == (0.6, 0.0)
    assert parts.communication_s + parts.sharding_overhead_s == pytest.approx(0.5)   # the floor, links first


@pytest.mark.parametrize("sharding", ["zero2", "zero3", "fsdp"])
def test_an_llm_step_on_nvlink_keeps_its_time_and_names_the_floor_apart(sharding):
    h100 = resolve_gpu(load_catalog(user_file=False), "h100-sxm")
    w = Workload("hf:meta-llama/Llama-2-7b-hf", finetune="full", precision="amp-bf16", batch_size=4, seq_len=2048,
                 sharding=sharding)
    one = estimate_llm(w.with_(num_gpus=1), h100).time
    for n in (2, 4, 8):
        t = estimate_llm(w.with_(num_gpus=n), h100).time
        assert t.step_time_s == pytest.approx(one.step_time_s, rel=1e-9)       # speed-up <= N, as before
        assert _parts_sum(t) == pytest.approx(t.step_time_s, rel=1e-9)
        saved = one.step_time_s - sum(t.by_class_s.values())
        assert t.sharding_overhead_s > 0 and t.communication_s < saved        # the links' figure, not the floor
        assert t.to_dict()["sharding_overhead_s"] == t.sharding_overhead_s
        assert t.bound != "communication"


def test_a_traced_step_splits_the_same_way():
    h100 = resolve_gpu(load_catalog(user_file=False), "h100-sxm")
    trace = mlp_trace(256, width=2048, precision="amp-bf16", sharding="zero3")
    w = trace.workload.with_(sharding="zero3")
    for n in (2, 8):
        t = predict_step_time(trace, h100, count=n, workload=w)
        assert _parts_sum(t) == pytest.approx(t.step_time_s, rel=1e-9)
        assert t.sharding_overhead_s >= 0 and t.communication_s > 0     # these links do not reach the floor


def test_estimate_prints_the_floor_beside_communication(capsys, cli_json):
    from gpuwise.cli.app import main

    args = ["estimate", "hf:meta-llama/Llama-2-7b-hf", "--gpu", "h100-sxm", "--finetune", "full", "--num-gpus", "8",
            "--sharding", "zero3", "--batch-size", "4", "--seq-len", "2048"]
    t = cli_json([*args, "--json"])["time"]
    assert t["sharding_overhead_s"] > 0
    capsys.readouterr()
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code
    text = " ".join(capsys.readouterr().out.split())
    assert "communication (exposed)" in text and SHARDING_OVERHEAD_PART in text
