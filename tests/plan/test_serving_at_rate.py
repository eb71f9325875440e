"""Issue 24: `recommend --mode infer --request-rate R` sizes serving by load: each GPU × count is the fewest replicas
that carry R requests/s (and meet --ttft/--tpot), ranked by cost per hour at that load. Invariants, not figures."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan import Constraints, JobSize, PlanError, model_for, recommend
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload, WorkloadError
from test_recommend import offer, small_catalog   # tests/plan is on sys.path (rootdir-relative imports)

IDS = ("rtx-4090", "a100-80gb-sxm4", "h100-sxm")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


@pytest.fixture(scope="module")
def cat(catalog):
    prices = {"rtx-4090": 2.0, "a100-80gb-sxm4": 7.0, "h100-sxm": 12.0}
    return small_catalog(catalog, set(IDS), [offer(g, p * n, count=n) for g, p in prices.items() for n in (1, 2)])


def _serve(rate: float | None, engine: str = "vllm", **kw) -> Workload:
    return Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=16,
                    engine=engine, precision="bf16", request_rate_per_s=rate, **kw)


def _at(rate, cat, engine="vllm", constraints=Constraints()):
    return recommend(model_for(_serve(rate, engine)), cat, job=JobSize.serving(256), max_gpus=2,
                     constraints=constraints)


def _option(rec, gpu, count=1):
    return next(o for o in rec.options if o.gpu == gpu and o.count == count)


@pytest.mark.parametrize("engine", ["vllm", "hf"])
def test_cost_per_hour_at_the_load_never_falls_as_the_rate_rises(cat, engine):
    recs = [_at(rate, cat, engine) for rate in (0.5, 2, 5, 12, 30, 60)]
    for gpu in IDS:
        costs = [_option(r, gpu).cost_per_hour_at_load for r in recs]
        replicas = [_option(r, gpu).replicas for r in recs]
        assert costs == sorted(costs) and replicas == sorted(replicas)
    best = [r.best.total_cost_ranked for r in recs]
    assert best == sorted(best)
    assert recs[-1].best.replicas > 1              # 60 requests/s: no one deployment of these carries it


def test_an_option_is_priced_by_its_replicas_and_its_tokens(cat):
    rec = _at(30, cat)
    for o in (o for o in rec.options if o.eligible):
        assert o.request_rate_per_s == 30 and o.replicas >= 1
        assert o.cost_per_hour_at_load == pytest.approx(o.replicas * o.price_per_hour)
        assert o.total_cost == pytest.approx(o.cost_per_hour_at_load)          # ranked by the hour
        assert o.cost_per_million_tokens == pytest.approx(o.cost_per_hour_at_load / (30 * 256 * 3600 / 1e6))
        assert o.concurrency > 0 and 0 < o.utilisation < 1
        assert 30 / o.replicas <= o.capacity_per_replica_per_s
    eligible = [o for o in rec.options if o.eligible]
    assert rec.best is min(eligible, key=lambda o: o.total_cost_ranked)
    keys = rec.to_dict()["options"][0]
    assert {"request_rate_per_s", "replicas", "concurrency", "utilisation", "cost_per_hour_at_load",
            "cost_per_million_tokens"} <= set(keys)


def test_latency_targets_apply_to_the_loaded_figures_and_may_add_replicas(cat):
    free = _at(8, cat)
    a100 = _option(free, "a100-80gb-sxm4")
    target = a100.tpot_s * 0.8                   # what one A100 sees at 8 requests/s, made stricter
    held = _at(8, cat, constraints=Constraints(max_tpot_s=target))
    for o in (o for o in held.options if o.eligible):
        assert o.tpot_s <= target
    again = _option(held, "a100-80gb-sxm4")
    assert again.eligible and again.replicas > a100.replicas and again.tpot_s <= target
    # the estimate's own loaded figures are what the quote shows, without targets
    est = estimate_llm(_serve(8), resolve_gpu(cat, "a100-80gb-sxm4"))
    assert a100.tpot_s == pytest.approx(est.inference.at_load.tpot_s)
    assert a100.ttft_s == pytest.approx(est.inference.at_load.ttft_s)


def test_vllm_needs_no_more_replicas_than_hf_generate(cat):
    vllm, hf = _at(20, cat, "vllm"), _at(20, cat, "hf")
    for gpu in IDS:
        assert _option(vllm, gpu).replicas <= _option(hf, gpu).replicas
    assert vllm.best.total_cost_ranked < hf.best.total_cost_ranked


def test_without_a_rate_the_static_batch_is_quoted_as_before(cat):
    rec = _at(None, cat)
    o = _option(rec, "h100-sxm")
    assert o.replicas is None and o.cost_per_million_tokens is None and o.batch_size == 16
    assert o.total_time_s == pytest.approx(JobSize.serving(256).optimizer_steps(16) * o.step_time_s)


def test_a_rate_is_refused_where_it_means_nothing(cat):
    with pytest.raises(WorkloadError, match="--request-rate must be a positive"):
        _serve(0.0)
    with pytest.raises(WorkloadError, match="--request-rate must be a positive"):
        _serve(float("nan"))
    with pytest.raises(WorkloadError, match="needs --mode infer"):
        Workload("hf:Qwen/Qwen2.5-7B", request_rate_per_s=2.0)
    with pytest.raises(WorkloadError, match="--max-new-tokens"):
        Workload("hf:Qwen/Qwen2.5-7B", mode="infer", request_rate_per_s=2.0)
    with pytest.raises(PlanError, match="decoder LLM"):
        model_for(Workload("torchvision:resnet18", mode="infer", max_new_tokens=4, request_rate_per_s=2.0))
    with pytest.raises(PlanError, match="--deadline"):
        _at(2, cat, constraints=Constraints(deadline_s=3600))


def test_vllm_capacity_is_one_rule_for_fit_largest_batch_and_the_load(catalog):
    """From a new user's trial: 'largest batch that fits 205' (HF's rule: the whole batch prefilled at once against
    95% of memory) beside a load model batching up to vLLM's 256; now one VllmCapacity answers every question."""
    from gpuwise.plan import largest_fitting_batch
    from gpuwise.plan.profile import ClosedFormLlmModel, estimate_fit

    gpu = resolve_gpu(catalog, "a100-80gb-sxm4")
    w = Workload("hf:meta-llama/Llama-2-7b-hf", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=1,
                 engine="vllm", precision="bf16")
    model = ClosedFormLlmModel(w)
    inf = model.estimate(gpu).inference
    cap = inf.vllm
    assert inf.max_batch_size == cap.batch(1280) == largest_fitting_batch(model, gpu) < 256
    held = cap.sequences(1280)
    assert estimate_fit(model.estimate(gpu, batch_size=held)).fits
    assert not estimate_fit(model.estimate(gpu, batch_size=held + 1)).fits
    assert inf.max_context_tokens == min(cap.longest_context(1), 4096)
    at_rate = ClosedFormLlmModel(w.with_(request_rate_per_s=5.0)).estimate(gpu).inference.at_load
    assert at_rate.curve.max_batch == cap.batch(1024 + 128)          # the mean context, the same capacity
    hf = ClosedFormLlmModel(w.with_(engine="hf")).estimate(gpu).inference
    assert hf.vllm is None and hf.max_batch_size < inf.max_batch_size   # vLLM's paged pool holds more
