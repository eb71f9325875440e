"""Generation by traced decoders (GPT-2, OPT, BLOOM, Falcon …): --max-new-tokens was silently ignored in --mode
infer (no KV cache, no decode time, ``"inference": null``). Each defect a new user met, pinned by a test."""

import re

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory import estimate_memory
from gpuwise.memory.llm_activations import decode_logits_bytes
from gpuwise.plan import JobSize, PlanError, model_for, recommend
from gpuwise.plan.generation import generation_arch
from gpuwise.runtime import predict_step_time
from gpuwise.runtime.llm import decode_step
from gpuwise.workload import Workload, WorkloadError
from test_recommend import offer, small_catalog   # tests/plan is on sys.path (rootdir-relative imports)

# GPT-2 (124M) in fp32 answering 128 prompts of 32 tokens with 992 new ones: the KV cache (2 × 12 layers × 768 ×
# 4 B × 128 × 1,024 tokens = 9.7 GB) dwarfs the weights (0.5 GB) and the prompts' forward, as gpt2-xl's 10 GB on
# 6 GiB of weights did in the report (hf:gpt2-xl, 512 + 512 tokens, batch 16: too slow to trace in a test)
PROMPT, NEW, BATCH = 32, 992, 128
KV_BYTES = 2 * 12 * 768 * 4 * BATCH * (PROMPT + NEW)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


@pytest.fixture(scope="module")
def generating():
    return model_for(Workload("hf:gpt2", mode="infer", seq_len=PROMPT, max_new_tokens=NEW, batch_size=BATCH))


@pytest.fixture(scope="module")
def scoring():
    """The same batch without generation: one forward of the prompts, as before."""
    return model_for(Workload("hf:gpt2", mode="infer", seq_len=PROMPT, batch_size=BATCH))


def test_the_kv_cache_of_the_whole_answer_is_at_the_peak_as_other_bytes(catalog, generating, scoring):
    """Was: the same memory with --max-new-tokens 512 as with 0 ("other 0 B")."""
    gpu = resolve_gpu(catalog, "rtx-3090")
    est, forward = generating.estimate(gpu), scoring.estimate(gpu)
    assert est.memory.other_bytes == KV_BYTES
    # the last decode step: weights + workspace + the whole cache + one position's logits
    logits = int(decode_logits_bytes(generation_arch(generating.workload), BATCH))
    assert est.memory.activations_bytes == logits
    assert est.memory.peak_allocated_bytes == (forward.memory.weights_bytes + forward.memory.workspace_bytes
                                               + KV_BYTES + logits)
    parts = ("weights", "gradients", "optimizer", "activations", "workspace", "other")
    assert sum(getattr(est.memory, f"{p}_bytes") for p in parts) == est.memory.peak_allocated_bytes
    assert est.memory.total_bytes > forward.memory.total_bytes + KV_BYTES
    assert "other_bytes is the KV cache at the peak" in est.memory.notes
    assert not any(n.startswith("peak during the forward") for n in est.memory.notes)   # no longer the peak


def test_a_short_answer_peaks_at_the_prefill_with_the_prompts_cache(catalog):
    w = Workload("hf:gpt2", mode="infer", seq_len=256, max_new_tokens=1, batch_size=8)
    t4 = resolve_gpu(catalog, "t4")
    model = model_for(w)
    est = model.estimate(t4)
    # the prefill is generate's own forward (logits_to_keep=1: the last position's logits), smaller than a
    # scoring forward of the same prompts, which keeps every position's
    prefill = estimate_memory(model.trace(), t4)
    scoring = model_for(w.with_(max_new_tokens=0)).estimate(t4)
    assert prefill.peak_allocated_bytes < scoring.memory.peak_allocated_bytes
    prompt_kv = 2 * 12 * 768 * 4 * 8 * 256
    assert est.memory.peak_allocated_bytes == prefill.peak_allocated_bytes + prompt_kv
    assert est.memory.other_bytes == prefill.other_bytes + prompt_kv


def test_decode_steps_are_the_closed_forms_on_the_traced_weights(catalog, generating, scoring):
    """Was: the step was the prompts' forward alone; decoding 992 tokens cost nothing."""
    gpu = resolve_gpu(catalog, "rtx-3090")
    est, forward = generating.estimate(gpu), scoring.estimate(gpu)
    inf = est.inference
    assert inf is not None and inf.kv_cache_bytes == KV_BYTES and inf.kv_cache_bytes_per_token == 2 * 12 * 768 * 4
    # the traced prefill is the time to first token: generate's forward, one position's logits (less than scoring's)
    prefill_s = predict_step_time(generating.trace(), gpu, workload=generating.workload).step_time_s
    assert inf.ttft_s == pytest.approx(prefill_s) and inf.ttft_s < forward.time.step_time_s
    d = decode_step(generation_arch(generating.workload), generating.workload, gpu,
                    weights_bytes=forward.memory.weights_bytes, context_tokens=PROMPT + NEW / 2, batch=BATCH,
                    kv_bytes_per_element=4.0)
    assert inf.time_per_output_token_s == pytest.approx(d.step_s)
    assert est.time.step_time_s == pytest.approx(inf.ttft_s + NEW * d.step_s)
    assert est.time.step_time_s > 20 * forward.time.step_time_s
    assert est.time.by_class_s == pytest.approx({"prefill": inf.ttft_s, "decode": NEW * d.step_s})
    assert est.time.samples_per_s == pytest.approx(BATCH / est.time.step_time_s)
    assert est.time.regime == "generation"      # the traced forward's held-out error does not apply


def test_recommend_sees_the_kv_cache_and_prices_the_decode(catalog, generating, scoring):
    """Was: a 12 GB RTX 3080 Ti recommended ("needs 9.5 GiB" for 10 GB of KV cache on 6 GiB of weights) and serving
    priced as if decoding cost nothing."""
    cat = small_catalog(catalog, {"rtx-3080-ti", "rtx-3090"}, [offer("rtx-3080-ti", 1.0), offer("rtx-3090", 1.5)])
    job = JobSize.serving(NEW)
    rec = recommend(generating, cat, job=job, max_gpus=1, remedies=False)
    by_gpu = {o.gpu: o for o in rec.options}
    assert not by_gpu["rtx-3080-ti"].fits and "OOM" in by_gpu["rtx-3080-ti"].excluded_because
    assert rec.best.gpu == "rtx-3090"
    best = rec.best
    est = generating.estimate(resolve_gpu(catalog, "rtx-3090"))
    assert best.step_time_s == pytest.approx(est.time.step_time_s)
    assert (best.ttft_s, best.tpot_s) == pytest.approx((est.inference.ttft_s, est.inference.time_per_output_token_s))
    batches = -(-job.samples // BATCH)
    assert best.total_time_s == pytest.approx(batches * est.time.step_time_s)
    unpriced = recommend(scoring, cat, job=job, max_gpus=1, remedies=False)
    assert best.total_cost > 20 * next(o for o in unpriced.options if o.gpu == "rtx-3090").total_cost


def test_estimate_recommend_and_json_agree(cli_json):
    args = ["hf:gpt2", "--mode", "infer", "--seq-len", str(PROMPT), "--max-new-tokens", str(NEW),
            "--batch-size", str(BATCH), "--json"]
    est = cli_json(["estimate", *args, "--gpu", "rtx-3090"])
    rec = cli_json(["recommend", *args, "--gpus", "rtx-3090", "--provider", "autodl", "--max-gpus", "1",
                    "--no-remedies"])
    option = next(o for o in rec["options"] if o["gpu"] == "rtx-3090" and o["count"] == 1)
    inf = est["inference"]
    assert inf is not None and inf["kv_cache_bytes"] == KV_BYTES and inf["new_tokens"] == NEW
    assert est["memory"]["other_bytes"] == KV_BYTES
    assert option["peak_total_bytes"] == est["memory"]["total_upper_bytes"]
    assert option["step_time_s"] == pytest.approx(est["time"]["step_time_s"])
    assert option["ttft_s"] == pytest.approx(inf["ttft_s"])
    assert option["tpot_s"] == pytest.approx(inf["time_per_output_token_s"])
    assert est["time"]["step_time_s"] == pytest.approx(inf["ttft_s"] + NEW * inf["time_per_output_token_s"])


@pytest.mark.parametrize(("model", "engine", "words"), [
    ("hf:t5-small", None, "hf:t5-small is an encoder-decoder model"),
    ("torchvision:resnet18", None, "not a decoder-only language model"),
    ("hf:bert-base-uncased", None, "not a decoder-only language model"),
    ("hf:gpt2", "vllm", "modelled as HF generate (--engine hf)"),
])
def test_generation_that_is_not_modelled_is_refused_in_one_line(model, engine, words):
    with pytest.raises(PlanError, match=re.escape(words)):
        model_for(Workload(model, mode="infer", seq_len=16, max_new_tokens=8, batch_size=1, engine=engine))


def test_prompt_and_answer_past_the_position_table_is_refused():
    with pytest.raises(WorkloadError, match="1,100 tokens exceeds hf:gpt2's 1,024 positions"):
        model_for(Workload("hf:gpt2", mode="infer", seq_len=1000, max_new_tokens=100, batch_size=1))


def test_the_cli_refuses_with_exit_2_and_one_line(cli_run):
    code, out, err = cli_run("estimate", "hf:t5-small", "--mode", "infer", "--max-new-tokens", "8", "--gpu", "t4")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--max-new-tokens" in err and "without it" in err
