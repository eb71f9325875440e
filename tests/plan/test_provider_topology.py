"""Where the GPUs are: the planner resolves the provider's topology once and every layer below uses it.

Before, every caller below the planner asked ``topology_for(gpu)`` without the provider: 16 GPUs at AWS
were timed over the assumed 10 Gb/s fallback ethernet instead of AWS's own network, a provider whose
machines have no PCIe peer-to-peer got the GPU's usual link, and ``estimate`` had no --provider.
"""

from __future__ import annotations

import copy
import importlib
import json

import pytest

import gpuwise.catalog.topology as topology_mod
from gpuwise.catalog import load_catalog
from gpuwise.catalog.model import Catalog
from gpuwise.cli.app import main
from gpuwise.plan import JobSize, model_for, recommend
from gpuwise.workload import Workload

recommend_mod = importlib.import_module("gpuwise.plan.recommend")   # the package exports a function of that name

LLM_16 = dict(model="hf:Qwen/Qwen2.5-7B", precision="bf16", num_gpus=16, seq_len=2048, batch_size=1)
LLM_ARGS = ["hf:Qwen/Qwen2.5-7B", "--precision", "bf16", "--seq-len", "2048", "--batch-size", "1"]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def _assumed(warnings) -> bool:
    return any("assumed" in w for w in warnings)


@pytest.mark.parametrize("gpu_id", ["a10g", "a100-80gb-sxm4"])   # AWS: 25 Gb/s ethernet; 400 Gb/s EFA
def test_16_gpus_at_aws_communicate_over_the_aws_network(catalog, gpu_id):
    model = model_for(Workload(**LLM_16))
    gpu = catalog.gpu(gpu_id)
    assumed = model.estimate(gpu, count=16)
    aws = model.estimate(gpu, count=16, provider="aws")
    assert aws.time.communication_s < assumed.time.communication_s
    assert aws.time.step_time_s < assumed.time.step_time_s
    assert _assumed(assumed.time.warnings) and not _assumed(aws.time.warnings), aws.time.warnings
    # two nodes of eight either way: the same NCCL buffers, the same memory
    assert aws.memory.total_upper_bytes == assumed.memory.total_upper_bytes


def test_a_traced_model_at_16_gpus_uses_the_provider_network_too(catalog):
    model = model_for(Workload(model="torchvision:resnet18", batch_size=4, image_size=64))
    gpu = catalog.gpu("t4")
    assumed = model.estimate(gpu, count=16)
    aws = model.estimate(gpu, count=16, provider="aws")
    assert 0 < aws.time.communication_s < assumed.time.communication_s
    assert _assumed(assumed.time.warnings) and not _assumed(aws.time.warnings)


def test_a_single_machine_provider_keeps_the_assumed_network_and_says_why(catalog):
    est = model_for(Workload(**LLM_16)).estimate(catalog.gpu("h800"), count=16, provider="autodl")
    assert any("AutoDL rents single machines" in w for w in est.time.warnings), est.time.warnings


def test_recommend_prices_a_16_gpu_option_over_the_provider_network(catalog, monkeypatch):
    monkeypatch.setattr(recommend_mod, "GPU_COUNTS", (16,))   # one count, past one machine
    model = model_for(Workload(**LLM_16))
    rec = recommend(model, catalog, job=JobSize(steps=100), provider="aws", gpu_ids=["a10g"], max_gpus=16,
                    per_gpu_batch=True)
    (option,) = rec.options
    assert (option.provider, option.count) == ("aws", 16)
    direct = model.estimate(catalog.gpu("a10g"), count=16, provider="aws")
    assert option.step_time_s == pytest.approx(direct.time.step_time_s, rel=1e-12)
    assert option.step_time_s < model.estimate(catalog.gpu("a10g"), count=16).time.step_time_s
    assert option.warnings == direct.time.warnings and not _assumed(option.warnings)


def test_recommend_uses_the_link_of_the_provider_machines(catalog, monkeypatch):
    """A provider whose 8-GPU A800 boxes have no peer-to-peer (data patched): its option is timed and
    sized on that link, not on the GPU's usual PCIe peer-to-peer."""
    data = copy.deepcopy(topology_mod.topology_data())
    autodl = next(p for p in data["provider"] if p["name"] == "autodl")
    next(s for s in autodl["system"] if s["gpu"] == "a800-80gb-pcie")["intra"] = "pcie-host"
    monkeypatch.setattr(topology_mod, "topology_data", lambda: data)
    model = model_for(Workload(**{**LLM_16, "num_gpus": 8, "finetune": "lora"}))
    gpu = catalog.gpu("a800-80gb-pcie")
    cat = Catalog(gpus=(gpu,), offers=tuple(o for o in catalog.offers if o.gpu_id == gpu.id and o.count == 8))
    rec = recommend(model, cat, job=JobSize(steps=100), provider="autodl", per_gpu_batch=True)
    (option,) = [o for o in rec.options if o.count == 8]
    direct = model.estimate(gpu, count=8, provider="autodl")
    usual = model.estimate(gpu, count=8)
    assert option.step_time_s == pytest.approx(direct.time.step_time_s, rel=1e-12)
    assert option.peak_total_bytes == direct.memory.total_upper_bytes
    assert direct.time.step_time_s > usual.time.step_time_s
    assert any("without PCIe peer-to-peer" in w for w in option.warnings)
    assert direct.memory.total_upper_bytes < usual.memory.total_upper_bytes   # fewer NCCL channels


def test_estimate_cli_provider_sets_the_network_and_is_named_in_json(cli_json):
    args = ["estimate", *LLM_ARGS, "--num-gpus", "16", "--gpu", "a10g", "--json"]
    plain = cli_json(args)
    aws = cli_json([*args, "--provider", "AWS"])
    assert plain["provider"] is None and aws["provider"] == "aws"
    assert aws["time"]["step_time_s"] < plain["time"]["step_time_s"]
    assert _assumed(plain["time"]["warnings"]) and not _assumed(aws["time"]["warnings"])


def _run(capsys, argv):
    capsys.readouterr()
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def test_estimate_cli_unknown_provider_exits_2_with_one_line(capsys):
    code, out, err = _run(capsys, ["estimate", *LLM_ARGS, "--num-gpus", "16", "--gpu", "a10g", "--provider", "awz",
                                   "--json"])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == ""
    assert len(lines) == 1 and "awz" in lines[0] and "did you mean: aws" in lines[0], err


def test_estimate_cli_provider_on_one_gpu_is_named_as_changing_nothing(capsys):
    code, out, err = _run(capsys, ["estimate", *LLM_ARGS, "--gpu", "a10g", "--provider", "aws", "--json"])
    assert code == 0 and json.loads(out)["provider"] == "aws"
    assert "gpuwise: warning: --provider aws changes nothing here" in err, err
