"""LLM plans that can actually run (issue 24): each defect a new user met, pinned by a test."""

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan import JobSize, model_for, recommend
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch
from test_recommend import offer, small_catalog   # tests/plan is on sys.path (rootdir-relative imports)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


@pytest.mark.parametrize(("ways", "ok"), [(1, True), (2, True), (4, True), (7, False), (8, False)])
def test_tensor_parallel_ways_follow_vllms_head_rule_for_qwen25_7b(ways, ok):
    arch = load_arch("hf:Qwen/Qwen2.5-7B")          # 28 attention heads, 4 KV heads
    assert (arch.num_heads, arch.num_kv_heads) == (28, 4)
    refusal = arch.tensor_parallel_refusal(ways)
    assert (refusal is None) == ok, refusal
    if not ok:
        assert ("28 attention heads" if 28 % ways else "4 KV heads") in refusal


def test_kv_heads_copied_a_whole_number_of_times_are_allowed_others_are_not():
    arch = load_arch("hf:Qwen/Qwen2.5-7B")
    # 8 ways of 4 KV heads copy each twice (allowed when the attention heads split: here they do not)
    assert arch.tensor_parallel_refusal(8) is not None
    from dataclasses import replace
    wide = replace(arch, num_heads=48, num_kv_heads=6)
    assert wide.tensor_parallel_refusal(12) is None       # 12 = 2 × 6: each KV head copied twice
    assert "6 KV heads" in wide.tensor_parallel_refusal(4)  # neither 6 % 4 nor 4 % 6


def test_serving_recommendation_never_quotes_a_tensor_parallel_count_the_heads_refuse(catalog):
    """Was: 8 × RTX A4000 with 8-way tensor parallelism for Qwen2.5-7B (28 heads): vLLM refuses it."""
    cat = small_catalog(catalog, {"rtx-a4000"}, [offer("rtx-a4000", 1.0 * n, count=n) for n in (1, 2, 4, 8)])
    w = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=32, engine="vllm")
    rec = recommend(model_for(w), cat, job=JobSize(samples=100_000), max_gpus=8)
    by_count = {o.count: o for o in rec.options}
    assert set(by_count) == {1, 2, 4, 8}
    assert not by_count[8].eligible and "28 attention heads" in by_count[8].excluded_because
    assert all("attention heads" not in (by_count[n].excluded_because or "") for n in (1, 2, 4))
    assert rec.best is None or rec.best.count != 8


def test_training_counts_are_data_parallel_and_not_held_to_the_head_rule():
    w = Workload("hf:Qwen/Qwen2.5-7B", mode="train", finetune="lora", seq_len=512, batch_size=8)
    assert model_for(w).count_refusal(8) is None


def _gpu(catalog, gpu_id):
    return next(g for g in catalog.gpus if g.id == gpu_id)


@pytest.mark.parametrize("sharding", ["zero3", "fsdp", "zero2"])
@pytest.mark.parametrize("finetune", ["full", "qlora"])
@pytest.mark.parametrize("gpu_id", ["h100-sxm", "a100-80gb-sxm4"])
def test_sharded_data_parallel_on_8_gpus_is_never_more_than_8_times_one(catalog, sharding, finetune, gpu_id):
    """Was: Llama-2-7B QLoRA under ZeRO-3 on 8 A100s 8.02× one GPU (the dequantisation and the optimizer
    split by 8, the gathers hidden; the audit's worst, 8.66×, on 8 H100s)."""
    w = Workload("hf:meta-llama/Llama-2-7b-hf", mode="train", finetune=finetune, seq_len=512, batch_size=1,
                 sharding=sharding)
    model = model_for(w)
    h100 = _gpu(catalog, gpu_id)
    one = model.estimate(h100, count=1).time
    eight = model.estimate(h100, count=8).time
    assert eight.samples_per_s <= 8 * one.samples_per_s * (1 + 1e-9)
    assert eight.step_time_s >= one.step_time_s * (1 - 1e-9)


def test_traced_zero3_bert_large_on_8_a100s_is_never_more_than_8_times_one(catalog):
    """Was: BERT-large on 8 A100s 9.78× one GPU."""
    w = Workload("hf:bert-large-uncased", mode="train", seq_len=128, batch_size=8, sharding="zero3")
    model = model_for(w)
    a100 = _gpu(catalog, "a100-80gb-sxm4")
    one = model.estimate(a100, count=1).time
    eight = model.estimate(a100, count=8).time
    assert eight.samples_per_s <= 8 * one.samples_per_s * (1 + 1e-9)


def test_a_micro_batch_smaller_than_the_count_says_which_flag_runs_it_there(catalog):
    """Was: 'effective batch 4 does not split evenly' on 8 GPUs, with no word of what to give instead."""
    from test_recommend import ScriptedModel

    cat = small_catalog(catalog, {"a100-80gb-sxm4"}, [offer("a100-80gb-sxm4", 10.0 * n, count=n) for n in (1, 8)])
    rec = recommend(ScriptedModel(Workload("scripted", batch_size=4)), cat, job=JobSize(steps=10), max_gpus=8)
    eight = next(o for o in rec.options if o.count == 8)
    assert "--effective-batch 8 splits 1 per GPU" in eight.excluded_because
    assert "--per-gpu-batch runs micro-batch 4 on each" in eight.excluded_because
    per_gpu = recommend(ScriptedModel(Workload("scripted", batch_size=4)), cat, job=JobSize(steps=10), max_gpus=8,
                        per_gpu_batch=True)
    assert next(o for o in per_gpu.options if o.count == 8).eligible     # the flag named does run it


@pytest.mark.parametrize(("gpu_id", "batch"), [("rtx-4090", 32), ("l4", 8), ("a100-80gb-sxm4", 64)])
def test_longest_context_and_fits_come_from_one_rule(catalog, gpu_id, batch):
    """Was: 'fits with 0.5 GiB to spare' for 1,024 + 256 tokens, then 'longest context that fits 1,093 tokens'
    (the context was searched as all prompt, no answer)."""
    from gpuwise.plan.profile import ClosedFormLlmModel, estimate_fit

    gpu = _gpu(catalog, gpu_id)
    w = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=batch,
                 engine="vllm", precision="bf16")
    est = ClosedFormLlmModel(w).estimate(gpu)
    verdict = estimate_fit(est)       # vLLM: its reservation holds the batch's KV cache (VllmCapacity)
    fit = verdict.fits
    asked = 1024 + 256
    assert (est.inference.max_context_tokens >= asked) == fit
    assert (est.inference.max_batch_size >= batch) == fit
    assert (verdict.spare_bytes >= 0) == fit


def test_serving_reports_time_per_output_token_and_tokens_per_request(catalog):
    from gpuwise.plan.llm import estimate_llm

    w = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=32,
                 engine="vllm", precision="bf16")
    inf = estimate_llm(w, _gpu(catalog, "a100-80gb-sxm4")).inference
    assert inf.decode_tokens_per_s_per_user == pytest.approx(1 / inf.time_per_output_token_s)
    assert inf.decode_tokens_per_s == pytest.approx(32 * inf.decode_tokens_per_s_per_user)


def test_tensor_parallel_serving_counts_one_batch_per_step_not_one_per_gpu(catalog):
    """Was: 2 GPUs serving one tensor-parallel batch were priced as if each served its own (half the time)."""
    import math

    cat = small_catalog(catalog, {"a100-80gb-sxm4"}, [offer("a100-80gb-sxm4", 10.0 * n, count=n) for n in (1, 2)])
    w = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=32, engine="vllm",
                 precision="bf16")
    rec = recommend(model_for(w), cat, job=JobSize(samples=3200), max_gpus=2)
    assert {o.count for o in rec.options} == {1, 2}
    for o in rec.options:
        assert o.total_time_s == pytest.approx(math.ceil(3200 / 32) * o.step_time_s)


def test_serving_without_a_size_is_priced_per_million_output_tokens(cli_json):
    out = cli_json(["recommend", "hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--seq-len", "512", "--max-new-tokens",
                    "250", "--batch-size", "8", "--gpus", "rtx-4090", "--max-gpus", "1", "--json"])
    (o,) = [o for o in out["options"] if o["count"] == 1][:1]
    assert o["total_time_s"] == pytest.approx(500 * o["step_time_s"])      # 4,000 requests of 250 tokens, 8 a step
    assert JobSize.serving(250).samples == 4000


def test_serving_latency_targets_leave_out_the_options_a_request_would_wait_too_long_on(catalog):
    """Issue 24: people size serving by a latency target (time to first token, time per output token);
    recommend took none, so the cheapest card was quoted however long a request waited on it."""
    from gpuwise.plan import Constraints

    ids = {"rtx-4090", "h100-sxm"}
    cat = small_catalog(catalog, ids, [offer(g, 2.0 if g == "rtx-4090" else 20.0) for g in ids])
    w = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=512, max_new_tokens=128, batch_size=2, engine="vllm",
                 precision="bf16")
    free = recommend(model_for(w), cat, job=JobSize(samples=10_000), max_gpus=1)
    by_gpu = {o.gpu: o for o in free.options}
    assert free.best.gpu == "rtx-4090"
    slow, fast = by_gpu["rtx-4090"], by_gpu["h100-sxm"]
    assert 0 < fast.tpot_s < slow.tpot_s and 0 < fast.ttft_s < slow.ttft_s
    target = (slow.tpot_s + fast.tpot_s) / 2            # between the two cards: only the H100 meets it
    held = recommend(model_for(w), cat, job=JobSize(samples=10_000), max_gpus=1,
                     constraints=Constraints(max_tpot_s=target))
    assert held.best.gpu == "h100-sxm"
    reason = next(o for o in held.options if o.gpu == "rtx-4090").excluded_because
    assert reason.startswith("time per output token") and "--tpot" in reason
    none = recommend(model_for(w), cat, job=JobSize(samples=10_000), max_gpus=1,
                     constraints=Constraints(max_ttft_s=fast.ttft_s / 2))
    assert none.best is None and "a time to first token of" in none.nothing_meets
    assert [o.gpu for o in none.closest][0] == "h100-sxm"      # the nearest to the target first
    assert held.to_dict()["options"][0]["tpot_s"] is not None


def test_latency_targets_are_refused_for_training():
    from gpuwise.plan import Constraints, PlanError

    w = Workload("hf:Qwen/Qwen2.5-7B", mode="train", finetune="lora", seq_len=512, batch_size=8)
    with pytest.raises(PlanError, match="--ttft and --tpot are targets for serving"):
        recommend(model_for(w), load_catalog(user_file=False), job=JobSize(steps=10),
                  constraints=Constraints(max_tpot_s=0.05))
    with pytest.raises(PlanError, match="--tpot must be a positive duration"):
        Constraints(max_tpot_s=0.0)


def test_every_missed_latency_target_is_named_and_remedies_keep_the_targets(catalog):
    """From a new-user trial: only the first missed target was named, and 'To fit a cheaper GPU: --quant nf4'
    was suggested with a time to first token seven times the --ttft asked."""
    from gpuwise.plan import Constraints

    w = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=1024, max_new_tokens=256, batch_size=16, engine="vllm",
                 precision="bf16")
    ids = {"rtx-a4000", "rtx-a5000", "h100-sxm"}
    cat = small_catalog(catalog, ids, [offer(g, {"rtx-a4000": 0.4, "rtx-a5000": 1.5, "h100-sxm": 20.0}[g]) for g in ids])
    targets = Constraints(max_ttft_s=1.0, max_tpot_s=0.025)
    rec = recommend(model_for(w), cat, job=JobSize(samples=10_000), max_gpus=1, constraints=targets, remedies=True)
    a5000 = next(o for o in rec.options if o.gpu == "rtx-a5000")
    assert a5000.ttft_s > 1.0 and a5000.tpot_s > 0.025
    assert "--ttft" in a5000.excluded_because and "--tpot" in a5000.excluded_because
    free = recommend(model_for(w), cat, job=JobSize(samples=10_000), max_gpus=1, remedies=True)
    slow_fixes = [r for r in free.remedies if r["ttft_s"] > 1.0]
    assert slow_fixes                                   # without targets: --quant nf4 rescues a cheap A4000
    kept = {(r["change"], r["gpu"]) for r in rec.remedies}
    assert not kept & {(r["change"], r["gpu"]) for r in slow_fixes}


def test_a_prefill_longer_than_the_decode_is_compute_bound(catalog):
    """From a new-user trial: 4,096-token prompts and 8 new tokens on an H100 read 'bound by bandwidth'
    beside a 1.1 s prefill and a 51 ms decode."""
    from gpuwise.plan.llm import estimate_llm

    h100 = _gpu(catalog, "h100-sxm")
    long_prompt = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=4096, max_new_tokens=8, batch_size=8,
                           engine="vllm", precision="bf16")
    long_answer = long_prompt.with_(seq_len=256, max_new_tokens=512)
    assert estimate_llm(long_prompt, h100).time.bound == "compute"
    assert estimate_llm(long_answer, h100).time.bound == "memory"


def test_tpot_needs_output_tokens():
    from gpuwise.plan import Constraints, PlanError

    w = Workload("hf:Qwen/Qwen2.5-7B", mode="infer", seq_len=1024, batch_size=4, precision="bf16")
    with pytest.raises(PlanError, match="--max-new-tokens"):
        recommend(model_for(w), load_catalog(user_file=False), job=JobSize(samples=10),
                  constraints=Constraints(max_tpot_s=0.05))
