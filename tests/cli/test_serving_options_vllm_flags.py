"""LLM serving options a new user's trial missed: vLLM's --kv-cache-dtype and --gpu-memory-utilization on
estimate and recommend (plumbed to ``estimate_llm``'s own), refused in one line where they do not apply; and the
serving output in serving's words (what nvidia-smi shows under vLLM, requests/s rather than samples/s)."""

from __future__ import annotations

import math
import re

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.units import format_bytes, format_request_rate
from gpuwise.workload import Workload

L3 = ["hf:meta-llama/Meta-Llama-3-8B", "--mode", "infer", "--seq-len", "4096", "--max-new-tokens", "512"]
Q05 = ["hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--seq-len", "512", "--max-new-tokens", "64"]


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


def _one_line_refusal(code: int, err: str) -> bool:
    return code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("gpuwise: error: ")


def test_estimate_kv_cache_dtype_fp8_is_the_apis_fp8_cache(cli_json, h100):
    # before: "No such option: --kv-cache-dtype"
    auto = cli_json(["estimate", *L3, "-b", "16", "--engine", "vllm", "--gpu", "h100-sxm", "--json"])
    fp8 = cli_json(["estimate", *L3, "-b", "16", "--engine", "vllm", "--gpu", "h100-sxm", "--kv-cache-dtype", "fp8",
                    "--json"])
    assert fp8["workload"]["kv_cache_dtype"] == "fp8" and auto["workload"]["kv_cache_dtype"] == "auto"
    assert fp8["inference"]["kv_cache_bytes_per_token"] * 2 == auto["inference"]["kv_cache_bytes_per_token"]
    # the same figures as the Python API's kv_cache_dtype="fp8" for that job
    job = Workload.from_dict({**auto["workload"]})
    api = estimate_llm(job, h100, kv_cache_dtype="fp8").inference
    assert fp8["inference"]["kv_cache_bytes"] == api.kv_cache_bytes
    assert fp8["inference"]["vllm"]["sequences_at_context"] == api.vllm.sequences(4096 + 512)
    assert fp8["inference"]["vllm"]["sequences_at_context"] > 1.9 * auto["inference"]["vllm"]["sequences_at_context"]


def test_estimate_gpu_memory_utilization_sets_vllms_reservation(cli_json, h100):
    out = cli_json(["estimate", *L3, "-b", "16", "--engine", "vllm", "--gpu", "h100-sxm",
                    "--gpu-memory-utilization", "0.5", "--json"])
    assert out["workload"]["gpu_memory_utilization"] == 0.5
    assert out["inference"]["serving_reserved_bytes"] == int(0.5 * h100.visible_memory_bytes)
    assert out["inference"]["vllm"]["gpu_memory_utilization"] == 0.5
    assert "gpu_memory_utilization 0.5" in out["fit_summary"]


def test_recommend_takes_the_options_and_prices_the_smaller_cache(cli_json):
    args = ["recommend", *L3, "--request-rate", "20", "--gpus", "h100-sxm", "--json"]
    auto, fp8 = cli_json(args), cli_json([*args, "--kv-cache-dtype", "fp8"])
    half = cli_json([*args, "--gpu-memory-utilization", "0.5"])
    assert fp8["workload"]["kv_cache_dtype"] == "fp8" and half["workload"]["gpu_memory_utilization"] == 0.5

    def capacity(answer: dict) -> dict:
        return {(o["gpu"], o["count"], o["provider"], o["spot"]): o["capacity_per_replica_per_s"]
                for o in answer["options"] if o.get("capacity_per_replica_per_s")}

    mine, smaller_cache, smaller_share = capacity(auto), capacity(fp8), capacity(half)
    same = mine.keys() & smaller_cache.keys() & smaller_share.keys()
    assert same
    # a cache of half the bytes holds more sequences, a smaller reservation fewer: each replica of the same option
    # carries more (fewer) requests a second
    assert all(smaller_cache[k] > mine[k] > smaller_share[k] for k in same)


@pytest.mark.parametrize("command", ["estimate", "recommend"])
def test_help_names_the_vllm_flags(cli_run, command):
    code, out, _ = cli_run(command, "--help")
    assert code == 0 and "--kv-cache-dtype" in out and "--gpu-memory-utilization" in out


@pytest.mark.parametrize("args, said", [
    ([*Q05, "--engine", "vllm", "--kv-cache-dtype", "fp7"], "unknown value 'fp7'"),
    ([*Q05, "--engine", "vllm", "--kv-cache-dtype", "int4"], "vLLM's KV cache is one of"),
    ([*Q05, "--engine", "vllm", "--gpu-memory-utilization", "0"], "in (0, 1]"),
    ([*Q05, "--engine", "vllm", "--gpu-memory-utilization", "1.5"], "in (0, 1]"),
    ([*Q05, "--engine", "vllm", "--gpu-memory-utilization", "nan"], "in (0, 1]"),
    ([*Q05, "--gpu-memory-utilization", "0.8"], "needs --engine vllm"),
    (["hf:Qwen/Qwen2.5-0.5B", "--seq-len", "512", "--kv-cache-dtype", "fp8"], "training step keeps no KV cache"),
    (["hf:Qwen/Qwen2.5-0.5B", "--gpu-memory-utilization", "0.8"], "training step keeps no KV cache"),
    (["torchvision:resnet18", "--mode", "infer", "--kv-cache-dtype", "int8"], "keeps no KV cache in this job"),
    (["torchvision:resnet18", "--mode", "infer", "--kv-cache-dtype", "fp8"], "it has no FP8 cache"),
    (["torchvision:resnet18", "--mode", "infer", "--engine", "vllm", "--gpu-memory-utilization", "0.8"],
     "not served by vLLM"),
])
@pytest.mark.parametrize("command", ["estimate", "recommend"])
def test_options_that_do_not_apply_are_refused_in_one_line(cli_run, command, args, said):
    where = ["--gpu", "h100-sxm"] if command == "estimate" else ["--gpus", "h100-sxm"]
    code, out, err = cli_run(command, *args, *where)
    assert _one_line_refusal(code, err) and said in err, err
    assert not out


def _table_row(out: str, label: str) -> str:
    return next(line for line in out.splitlines() if label in line)


def test_vllm_table_says_what_nvidia_smi_shows(cli_run, cli_json):
    # before: "total (nvidia-smi) 24.8 GiB" beside the note "vLLM pre-allocates ... (71.7 GiB) ... so nvidia-smi
    # shows that"
    args = ["estimate", *L3, "-b", "16", "--engine", "vllm", "--gpu", "h100-sxm"]
    answer = cli_json([*args, "--json"])
    code, out, _ = cli_run(*args)
    assert code == 0
    smi = _table_row(out, "nvidia-smi")
    assert format_bytes(answer["inference"]["serving_reserved_bytes"]) in smi and "vLLM" in smi
    assert format_bytes(answer["memory"]["total_bytes"]) in _table_row(out, "this batch needs")
    # HF generate allocates as it goes: its nvidia-smi row is the batch's own total
    hf = cli_json(["estimate", *L3, "-b", "16", "--gpu", "h100-sxm", "--json"])
    code, out, _ = cli_run("estimate", *L3, "-b", "16", "--gpu", "h100-sxm")
    assert format_bytes(hf["memory"]["total_bytes"]) in _table_row(out, "total (nvidia-smi)")


def test_a_served_batch_is_timed_in_requests_and_tokens_not_samples(cli_run, cli_json):
    args = ["estimate", *L3, "-b", "16", "--engine", "vllm", "--gpu", "h100-sxm"]
    answer = cli_json([*args, "--json"])
    code, out, _ = cli_run(*args)
    text = " ".join(out.split())       # the line as one, wrapped at 80 columns or not
    assert code == 0 and "samples/s" not in text and "Step time" not in text
    step_s = answer["time"]["step_time_s"]
    assert f"{format_request_rate(16 / step_s)}, {16 * 512 / step_s:,.0f} output tokens/s" in text


def test_at_a_request_rate_the_step_is_one_request_alone_with_no_rate_of_its_own(cli_run):
    # before: "Step time 1.6 s, 0.61 samples/s" beside "At 2 requests/s: ..."
    code, out, _ = cli_run("estimate", *L3, "--gpu", "h100-sxm", "--request-rate", "2")
    text = " ".join(out.split())
    assert code == 0 and "samples/s" not in text and "Step time" not in text
    line = re.search(r"Alone on an idle replica, one request \(4,096 \+ 512 tokens\) takes [^,]+ end to end", text)
    assert line, text
    rates = set(re.findall(r"([\d.,]+) requests?/s", text))
    # the only rates said are the load's: the rate asked and what one replica carries
    assert "2" in rates and all(not math.isclose(float(r.replace(",", "")), 0.61, rel_tol=0.2) for r in rates)


def test_a_traced_decoder_generating_sizes_its_cache_by_the_dtype(cli_json):
    from gpuwise.workload.storage import KV_CACHE_BYTES, compute_bytes

    args = ["estimate", "hf:gpt2", "--mode", "infer", "--seq-len", "128", "--max-new-tokens", "32", "-b", "2",
            "--gpu", "t4", "--json"]
    auto, int8 = cli_json(args), cli_json([*args, "--kv-cache-dtype", "int8"])
    ratio = compute_bytes(auto["workload"]["precision"]) / KV_CACHE_BYTES["int8"]
    assert auto["inference"]["kv_cache_bytes_per_token"] == ratio * int8["inference"]["kv_cache_bytes_per_token"]


def test_a_traced_decoder_on_two_gpus_counts_both_replicas(cli_run, cli_json):
    # review: "A batch of 8 requests ... 28.2 requests/s" where --json said 56.3 (two replicas of the batch)
    args = ["estimate", "hf:gpt2", "--mode", "infer", "--seq-len", "128", "--max-new-tokens", "32", "-b", "8",
            "--gpu", "a100-80gb-sxm4", "--num-gpus", "2"]
    answer = cli_json([*args, "--json"])
    code, out, _ = cli_run(*args)
    text = " ".join(out.split())
    rate = answer["time"]["samples_per_s"]
    assert code == 0 and "on each of 2 GPUs" in text
    assert f"{format_request_rate(rate)}, {rate * 32:,.0f} output tokens/s" in text
