"""vLLM prefills a long prompt in chunks of its scheduler's token budget (max_num_batched_tokens): the memory of a
batch holds one chunk's activations, never the whole prompt's. Llama-3.1-8B with a 120,000-token prompt on an H100
said its activations were 11.4 GiB, while vLLM's own profiling forward (8,192 tokens, the capacity rule) held 1.9."""

import os

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.memory.llm import infer_memory
from gpuwise.plan.llm import estimate_llm, vllm_batch_defaults
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
L8 = "hf:meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def h100():
    return load_catalog(user_file=False).gpu("h100-sxm")


def _serve(engine: str, prompt_tokens: int) -> Workload:
    return Workload(L8, mode="infer", precision="bf16", engine=engine, batch_size=1, seq_len=prompt_tokens,
                    max_new_tokens=512)


def test_a_prompt_past_the_token_budget_holds_one_chunk_of_activations(h100):
    budget = vllm_batch_defaults(h100).max_num_batched_tokens
    chunk = infer_memory(load_arch(L8), _serve("vllm", budget), h100, prompt_tokens=budget, new_tokens=0, batch=1,
                         kv_bytes_per_element=2.0)
    est = estimate_llm(_serve("vllm", 120_000), h100)
    assert est.inference.prefill_activation_bytes == int(chunk.prefill_bytes)
    assert est.memory.activations_bytes <= chunk.memory.activations_bytes


def test_hf_generate_still_prefills_the_whole_prompt_at_once(h100):
    hf, vllm = (estimate_llm(_serve(engine, 120_000), h100).inference.prefill_activation_bytes
                for engine in ("hf", "vllm"))
    assert hf > 10 * vllm      # 120,000 tokens in one forward against 8,192
