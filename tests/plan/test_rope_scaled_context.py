"""A config whose rope scaling extends its positions (Qwen2.5's model card: yarn, factor 4 over 32,768 positions, to
serve 131,072 tokens) runs that long: vLLM derives 131,072 from it and starts, so the closed form checks a context
against that one length, not against the bare ``max_position_embeddings``.

Before: ``estimate hf:qwen7b_yarn.json --mode infer --engine vllm --seq-len 60000 --max-new-tokens 1000 -b 1 --gpu
a100-80gb`` estimated the 61,000-token job (vLLM starts with it) yet said "longest context that fits 32,768 tokens"
and "61,000 tokens per sequence is past ... context of 32,768 (max_position_embeddings) ... not trained that long"."""

from __future__ import annotations

import json

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload

POSITIONS = 32768
YARN_FACTOR = 4
QWEN25_7B_YARN = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
    "max_position_embeddings": POSITIONS, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "yarn", "factor": float(YARN_FACTOR), "original_max_position_embeddings": POSITIONS},
}
SCALED = POSITIONS * YARN_FACTOR


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("yarn") / "config.json"
    path.write_text(json.dumps(QWEN25_7B_YARN))
    return f"hf:{path}"


@pytest.fixture(scope="module")
def a100():
    return load_catalog(user_file=False).gpu("a100-80gb-sxm4")


def _serve(model: str, engine: str, prompt_tokens: int, batch: int = 1) -> Workload:
    return Workload(model, mode="infer", engine=engine, precision="bf16", seq_len=prompt_tokens,
                    max_new_tokens=1000, batch_size=batch)


@pytest.mark.parametrize("engine", ["vllm", "hf"])
def test_a_context_within_the_rope_scaled_length_is_not_called_past_the_models_context(model, a100, engine):
    est = estimate_llm(_serve(model, engine, 60000), a100)
    assert not [n for n in est.notes if "not trained that long" in n]


def test_vllms_longest_context_reaches_the_rope_scaled_length_it_starts_with(model, a100):
    est = estimate_llm(_serve(model, "vllm", 60000), a100)
    assert est.inference.max_context_tokens == SCALED
    assert any(f"context is {SCALED:,}" in n for n in est.notes)


def test_hf_generate_past_the_rope_scaled_length_names_that_length(model, a100):
    est = estimate_llm(_serve(model, "hf", SCALED), a100)
    (note,) = [n for n in est.notes if "not trained that long" in n]
    assert f"context of {SCALED:,}" in note and f"max_position_embeddings is {POSITIONS:,}" in note
