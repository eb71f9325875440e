"""The `vllm serve` line names the KV-cache dtype and vLLM's share of the GPU the plan was sized with: a plan
estimated at `--kv-cache-dtype fp8` (twice the sequences) or `--gpu-memory-utilization 0.5` named a line that ran
vLLM at its defaults, a different server from the one priced."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import pytest

from gpuwise.launch import server_emit_refusal
from gpuwise.workload import Workload


def _served_words(**fields) -> list[str]:
    workload = Workload("hf:Qwen/Qwen2.5-0.5B", mode="infer", engine="vllm", seq_len=1024, max_new_tokens=256,
                        **fields).with_default_precision()
    best = SimpleNamespace(count=1, gpu="rtx-4090", provider="autodl", replicas=1)
    line = server_emit_refusal(SimpleNamespace(workload=workload, best=best, fallback_precision={}), "torchrun")
    return shlex.split(line.split("`")[1])


@pytest.mark.parametrize("fields, flags", [
    ({}, []),
    ({"kv_cache_dtype": "fp8"}, ["--kv-cache-dtype", "fp8"]),
    ({"kv_cache_dtype": "bf16"}, ["--kv-cache-dtype", "bfloat16"]),          # vLLM's spelling
    ({"gpu_memory_utilization": 0.5}, ["--gpu-memory-utilization", "0.5"]),
])
def test_the_line_names_the_memory_settings_the_plan_was_sized_with(fields, flags):
    words = _served_words(**fields)
    assert words[:2] == ["vllm", "serve"] and "--max-model-len" in words
    tail = words[words.index("--max-model-len") + 2:]
    # AutoDL's line ends with where it listens (its custom service's port, test_autodl_serving_command.py)
    assert tail[:len(tail) - 4] == flags and tail[-4:] == ["--host", "0.0.0.0", "--port", "6006"]
