"""`--request-rate R` on `recommend` and `estimate` (issue 24): LLM serving sized by load, end to end."""

import json
import re

import pytest


SERVE = ["hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--seq-len", "512", "--max-new-tokens", "64", "--engine", "vllm"]
LOAD_KEYS = {"request_rate_per_s", "concurrency", "utilisation", "replicas", "cost_per_hour_at_load",
             "cost_per_million_tokens"}


@pytest.fixture
def gpuwise(cli_run):
    return cli_run


def test_recommend_at_a_rate_lists_replicas_and_the_cost_of_the_load(gpuwise):
    code, out, err = gpuwise("recommend", *SERVE, "--request-rate", "4", "--provider", "autodl", "--max-gpus", "2",
                             "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["workload"]["request_rate_per_s"] == 4
    served = [o for o in rec["options"] if o["excluded_because"] is None]
    assert served and all(LOAD_KEYS <= set(o) for o in rec["options"])
    for o in served:
        assert o["request_rate_per_s"] == 4 and o["replicas"] >= 1 and 0 < o["utilisation"] < 1
        assert o["cost_per_hour_at_load"] == pytest.approx(o["replicas"] * o["price_per_hour"])
    assert rec["best"]["total_cost_ranked"] == min(o["total_cost_ranked"] for o in served)

    code, out, err = gpuwise("recommend", *SERVE, "--request-rate", "4", "--provider", "autodl", "--max-gpus", "2",
                             "--no-remedies")
    assert code == 0, err
    text = " ".join(out.split())
    for column in ("repl.", "load", "ttft", "tpot", "cost/h"):
        assert column in text
    assert "load: the rate each replica carries as a share of the most it can carry" in text
    assert re.search(r"Best: \d+ replicas? of \d× ", text), text
    assert "per million output tokens" in text and "requests in flight" in text
    assert "Poisson arrivals" in text and "Serving priced per million output tokens:" not in text
    assert max(len(line) for line in out.splitlines()) <= 80


def test_estimate_at_a_rate_says_what_the_deployment_does_there(gpuwise):
    code, out, err = gpuwise("estimate", *SERVE, "--request-rate", "4", "--gpu", "rtx-4090", "--json")
    assert code == 0, err
    load = json.loads(out)["inference"]["at_load"]
    assert {"request_rate_per_s", "replicas", "concurrency", "utilisation", "ttft_s", "tpot_s",
            "capacity_per_replica_per_s"} <= set(load)
    code, out, err = gpuwise("estimate", *SERVE, "--request-rate", "4", "--gpu", "rtx-4090")
    assert code == 0, err
    text = " ".join(out.split())
    assert "At 4 requests/s: 1 replica" in text and "requests in flight" in text and "of the rate it carries" in text


@pytest.mark.parametrize("args, said", [
    (["--request-rate", "0"], "--request-rate must be a positive number"),
    (["--request-rate", "-3"], "--request-rate must be a positive number"),
    (["--request-rate", "nan"], "--request-rate must be a positive number"),
    (["--request-rate", "two"], "--request-rate"),
    (["--request-rate", "2", "--mode", "train"], "needs --mode infer"),
    (["--request-rate", "2", "--deadline", "2h"], "--deadline"),
    (["--request-rate", "2", "--samples", "1000"], "--samples"),
])
def test_a_rate_that_means_nothing_is_refused_in_one_line(gpuwise, args, said):
    code, out, err = gpuwise("recommend", *SERVE, *args)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("command", ["recommend", "estimate"])
def test_a_rate_on_a_traced_model_is_refused_in_one_line(gpuwise, command):
    code, out, err = gpuwise(command, "torchvision:resnet18", "--mode", "infer", "--max-new-tokens", "4",
                             "--request-rate", "2")
    assert code == 2 and "--request-rate sizes serving a decoder LLM" in err and len(err.strip().splitlines()) == 1
