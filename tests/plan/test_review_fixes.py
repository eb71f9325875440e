"""Defects a new-user walkthrough found (2026-12-03), each pinned by a test."""

import math

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.catalog.model import Offer
from gpuwise.cli.app import main
from gpuwise.plan import JobSize, PlanError, recommend
from gpuwise.plan.constraints import Constraints
from gpuwise.plan.offers import cheapest_to_rent_one

from gpuwise.workload import Workload
from test_recommend import ScriptedModel, small_catalog   # tests/plan is on sys.path (rootdir-relative imports)

GB = 10**9


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def test_llm_serving_defaults_to_the_checkpoints_half_precision_and_suggests_it(cli_json):
    out = cli_json(["estimate", "hf:meta-llama/Llama-3.1-8B", "--mode", "infer", "--gpu", "l4", "--json"])
    assert out["workload"]["precision"] == "bf16" and out["fits"]
    fp32 = cli_json(["estimate", "hf:meta-llama/Llama-3.1-8B", "--mode", "infer", "--precision", "fp32", "--gpu", "l4",
                  "--json"])
    assert not fp32["fits"]
    assert "--precision bf16" in [c["change"] for c in fp32["changes_that_fit"]]   # not training-only advice


def test_auto_batch_runs_an_effective_batch_that_fits_as_one_micro_batch(catalog):
    cat = small_catalog(catalog, {"h100-sxm"}, [Offer("autodl", "h100-sxm", 1, 20.0, "CNY", False, "t", "2026-12-01")])
    model = ScriptedModel(Workload("scripted", batch_size=100), fixed_bytes=2 * GB, per_sample_bytes=0.05 * GB)
    rec = recommend(model, cat, job=JobSize(steps=10), max_gpus=1, auto_batch=True, effective_batch=100)
    (o,) = rec.options
    assert (o.batch_size, o.grad_accum_steps) == (100, 1)     # was 50 × 2: powers of two only


def test_gpus_shows_the_on_demand_price_and_spot_only_where_there_is_no_other():
    offers = {"t4": [Offer("gcp", "t4", 1, 0.18, "USD", True, "t", "d"), Offer("aws", "t4", 1, 0.53, "USD", False, "t", "d")],
              "x": [Offer("runpod", "x", 1, 0.3, "USD", True, "t", "d")]}
    _, best = cheapest_to_rent_one(offers)
    assert (best["t4"].provider, best["t4"].spot) == ("aws", False)
    assert best["x"].spot


def test_recommend_table_shows_costs_in_the_ranking_currency(capsys):
    try:
        main(["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "512", "--batch-size", "4",
              "--steps", "100", "--max-gpus", "1", "--currency", "USD", "--no-remedies", "--all"])
    except SystemExit as exc:
        assert not exc.code
    text = capsys.readouterr().out
    table = text.split("\n\n")[0] if "\n\n" in text else text
    assert "$" in text and "¥" not in table


def test_estimate_and_recommend_agree_that_bf16_cannot_run_on_a_t4(cli_json):
    est = cli_json(["estimate", "hf:bert-base-uncased", "--seq-len", "128", "--batch-size", "8", "--precision", "amp-bf16",
                 "--gpu", "all", "--json"])
    est = next(r for r in est["per_gpu"] if r["gpu"] == "t4")
    assert est["cannot_run"].startswith("no bf16") and est["step_time_s"] is None
    rec = cli_json(["recommend", "hf:bert-base-uncased", "--seq-len", "128", "--batch-size", "8", "--precision", "amp-bf16",
                 "--steps", "10", "--gpus", "t4", "--max-gpus", "1", "--no-remedies", "--json"])
    assert rec["options"][0]["excluded_because"] == est["cannot_run"]


def test_nothing_meets_says_when_the_batch_cannot_be_split_over_gpus(catalog):
    cat = small_catalog(catalog, {"rtx-4090"}, [Offer("autodl", "rtx-4090", 1, 2.0, "CNY", False, "t", "d")])
    model = ScriptedModel(Workload("scripted", batch_size=1), fixed_bytes=40 * GB)
    rec = recommend(model, cat, job=JobSize(steps=10), max_gpus=4)
    assert rec.best is None and "--per-gpu-batch" in rec.nothing_meets


def test_a_job_without_a_size_is_told_what_to_give():
    with pytest.raises(PlanError, match=r"give the job's size: --samples N"):
        JobSize()


@pytest.mark.parametrize("kwargs", [{"deadline_s": 0.0}, {"deadline_s": -3600.0}, {"deadline_s": math.inf},
                                    {"budget": 0.0}, {"budget": -5.0}, {"budget": math.nan}])
def test_library_constraints_refuse_a_deadline_or_budget_that_is_not_positive(kwargs):
    """The checks sat after the ``return`` of ``latency_targets`` and never ran: a library caller's
    ``Constraints(deadline_s=0)`` left out every option as missing its deadline, with no error."""
    with pytest.raises(PlanError, match="--deadline|--budget"):
        Constraints(**kwargs)


def test_auto_batch_steps_down_to_the_micro_batch_that_fits_at_its_accumulation(cli_json):
    # a new user's trial: -b auto chose 2 x 16 (it fits at one micro-batch a step, not with the gradients
    # accumulation keeps: OOM risk) and said nothing fits, though -b 1 --grad-accum 32 fits with 7 GiB spare
    job = ["recommend", "hf:meta-llama/Llama-3.2-1B", "--seq-len", "2048", "--effective-batch", "32", "--precision",
           "amp-bf16", "--steps", "2000", "--provider", "autodl", "--gpus", "a100-40gb-pcie", "--max-gpus", "1",
           "--no-remedies", "--json"]
    auto = cli_json([*job, "--batch-size", "auto"])
    assert auto["nothing_meets"] is None and auto["best"] is not None
    best = auto["best"]
    assert (best["gpu"], best["count"], best["batch_size"], best["grad_accum_steps"]) == ("a100-40gb-pcie", 1, 1, 32)
    asked = cli_json([*job[:4], *job[6:], "--batch-size", "1", "--grad-accum", "32"])["best"]   # no --effective-batch
    assert best["peak_total_bytes"] == asked["peak_total_bytes"] and best["total_cost"] == asked["total_cost"]
