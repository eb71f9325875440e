"""The `vllm serve` line names `--dtype` where vLLM's default (the checkpoint's own 16-bit type) is not the
precision the plan was priced at: a bf16 checkpoint on a GPU without bf16 (V100, T4) is priced at its fp16 twin, and
vLLM refuses to start a bf16 checkpoint there unless told `--dtype float16`; a precision the user named is named."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

from gpuwise.launch import server_emit_refusal
from gpuwise.workload import Workload

L8 = "hf:meta-llama/Llama-3.1-8B"      # stored in bfloat16


def _served_words(workload, gpu, fallback_precision) -> list[str]:
    best = SimpleNamespace(count=1, gpu=gpu, provider="aws", replicas=1)
    rec = SimpleNamespace(workload=workload, best=best, fallback_precision=fallback_precision)
    return shlex.split(server_emit_refusal(rec, "skypilot").split("`")[1])


def _dtype(words: list[str]) -> str | None:
    return words[words.index("--dtype") + 1] if "--dtype" in words else None


def _default_job() -> Workload:
    return Workload(L8, mode="infer", engine="vllm", seq_len=1024, max_new_tokens=256).with_default_precision()


def test_a_bf16_checkpoint_on_a_gpu_without_bf16_is_served_at_float16_as_priced():
    words = _served_words(_default_job(), "v100-32gb-sxm2", {"v100-32gb-sxm2": "fp16"})
    assert words[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert _dtype(words) == "float16"


def test_the_checkpoint_s_own_precision_needs_no_flag():
    assert _dtype(_served_words(_default_job(), "a100-80gb-sxm4", {})) is None


def test_a_precision_the_user_named_is_named_in_vllm_s_spelling():
    job = Workload(L8, mode="infer", engine="vllm", seq_len=1024, max_new_tokens=256, precision="fp16")
    assert _dtype(_served_words(job, "a100-80gb-sxm4", {})) == "float16"
    job32 = job.with_(precision="fp32")
    assert _dtype(_served_words(job32, "a100-80gb-sxm4", {})) == "float32"
