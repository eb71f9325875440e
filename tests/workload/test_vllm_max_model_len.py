"""The longest context vLLM starts with is what its _get_and_verify_max_len derives from the config: the smallest
length key times a rope scaling factor (yarn from original_max_position_embeddings), except for the rope types whose
length already counts it (llama3, longrope, su) and Gemma 3. Was: the refusal of a vLLM context past the positions
read max_position_embeddings alone, so InternLM2.5-7B (dynamic rope x2: vLLM allows 65,536) was refused at 40,000."""

from __future__ import annotations

import os

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.llm import estimate_llm, vllm_context_refusal
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch
from gpuwise.workload.decoder_configs import vllm_max_model_len

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("rope, expected", [
    (None, 32768),
    ({"type": "dynamic", "factor": 2.0}, 65536),
    ({"rope_type": "linear", "factor": 4.0}, 131072),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}, 16384),
    ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}, 32768),
    ({"rope_type": "longrope", "factor": 4.0}, 32768),
    ({"rope_type": "mrope", "mrope_section": [16, 24, 24]}, 32768),
])
def test_rope_scaling_as_vllm_derives_it(rope, expected):
    cfg = {"model_type": "llama", "max_position_embeddings": 32768}
    if rope is not None:
        cfg["rope_scaling"] = rope
    assert vllm_max_model_len(cfg) == expected


def test_the_smallest_length_key_and_gemma3_unscaled():
    assert vllm_max_model_len({"model_type": "gpt2", "n_positions": 1024, "max_position_embeddings": 2048}) == 1024
    gemma3 = {"model_type": "gemma3_text", "max_position_embeddings": 131072,
              "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    assert vllm_max_model_len(gemma3) == 131072
    assert vllm_max_model_len({"model_type": "llama"}) == 0
    cohere = {"model_type": "cohere", "max_position_embeddings": 8192, "model_max_length": 131072}
    assert vllm_max_model_len(cohere) == 131072       # vLLM's case for Command-R: model_max_length decides


def test_a_dynamically_scaled_model_is_served_past_its_positions_up_to_the_scaled_length():
    model = "hf:internlm/internlm2_5-7b"
    arch = load_arch(model)
    limit = arch.vllm_max_model_len
    assert limit == 2 * arch.max_position_embeddings
    within = Workload(model=model, mode="infer", engine="vllm", batch_size=1, seq_len=limit - 100,
                      max_new_tokens=100)
    assert vllm_context_refusal(within, arch) is None
    estimate_llm(within, load_catalog(user_file=False).gpu("h100-sxm"))
    past = Workload(model=model, mode="infer", engine="vllm", batch_size=1, seq_len=limit, max_new_tokens=1)
    assert f"past the {limit:,} vLLM derives" in vllm_context_refusal(past, arch)
