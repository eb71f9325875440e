"""The shipped LLM configs describe the published models: parameter counts within 2%."""

import json

import pytest

from gpuwise.workload.decoder import arch_from_config, is_llm
from gpuwise.workload.llm_config import CONFIG_DIR, config_path_for, load_config, shipped_llm_names
from gpuwise.workload import WorkloadError as LlmError
from gpuwise.workload import Workload

# Published sizes (model cards / papers), in billions of parameters. Gemma 3 4B/12B/27B: the
# language model only (technical report table 1: embedding + non-embedding, without the 417M
# SigLIP encoder). MoE rows also give the activated count.
PUBLISHED_B = {
    "meta-llama/Llama-2-7b-hf": 6.74, "meta-llama/Llama-2-13b-hf": 13.02, "meta-llama/Llama-2-70b-hf": 68.98,
    "meta-llama/Meta-Llama-3-8B": 8.03, "meta-llama/Meta-Llama-3-70B": 70.6, "meta-llama/Llama-3.1-8B": 8.03,
    "meta-llama/Llama-3.1-70B": 70.6, "meta-llama/Llama-3.1-405B": 405.9, "meta-llama/Llama-3.2-1B": 1.24,
    "meta-llama/Llama-3.2-3B": 3.21,
    "Qwen/Qwen2-0.5B": 0.49, "Qwen/Qwen2-1.5B": 1.54, "Qwen/Qwen2-7B": 7.62, "Qwen/Qwen2-72B": 72.7,
    "Qwen/Qwen2.5-0.5B": 0.49, "Qwen/Qwen2.5-1.5B": 1.54, "Qwen/Qwen2.5-3B": 3.09, "Qwen/Qwen2.5-7B": 7.61,
    "Qwen/Qwen2.5-14B": 14.7, "Qwen/Qwen2.5-32B": 32.5, "Qwen/Qwen2.5-72B": 72.7,
    "Qwen/Qwen3-0.6B": 0.6, "Qwen/Qwen3-1.7B": 1.7, "Qwen/Qwen3-4B": 4.0, "Qwen/Qwen3-8B": 8.2,
    "Qwen/Qwen3-14B": 14.8, "Qwen/Qwen3-32B": 32.8, "Qwen/Qwen3-30B-A3B": 30.5, "Qwen/Qwen3-235B-A22B": 235.0,
    "Qwen/Qwen1.5-MoE-A2.7B": 14.3, "Qwen/Qwen2-57B-A14B": 57.4,
    "mistralai/Mistral-7B-v0.1": 7.24, "mistralai/Mistral-7B-v0.3": 7.25, "mistralai/Mixtral-8x7B-v0.1": 46.7,
    "mistralai/Mixtral-8x22B-v0.1": 140.6,
    "google/gemma-2-2b": 2.61, "google/gemma-2-9b": 9.24, "google/gemma-2-27b": 27.2,
    "google/gemma-3-1b-pt": 1.0, "google/gemma-3-4b-pt": 3.884, "google/gemma-3-12b-pt": 11.77,
    "google/gemma-3-27b-pt": 27.0,
    "microsoft/Phi-3-mini-4k-instruct": 3.82, "microsoft/Phi-3-medium-4k-instruct": 13.96, "microsoft/phi-4": 14.7,
    "microsoft/phi-1_5": 1.42, "stabilityai/stablelm-base-alpha-3b": 3.64,
    "deepseek-ai/deepseek-llm-7b-base": 6.91, "deepseek-ai/DeepSeek-V2-Lite": 15.7, "deepseek-ai/DeepSeek-V3": 671.0,
    "THUDM/glm-4-9b": 9.4, "internlm/internlm2_5-7b": 7.74,
    "01-ai/Yi-1.5-6B": 6.06, "01-ai/Yi-1.5-9B": 8.83, "01-ai/Yi-1.5-34B": 34.4,
    "baichuan-inc/Baichuan2-7B-Base": 7.51, "baichuan-inc/Baichuan2-13B-Base": 13.9,
}
ACTIVE_B = {"Qwen/Qwen3-30B-A3B": 3.3, "Qwen/Qwen3-235B-A22B": 22.0, "Qwen/Qwen1.5-MoE-A2.7B": 2.7,
            "Qwen/Qwen2-57B-A14B": 14.0, "mistralai/Mixtral-8x7B-v0.1": 12.9, "mistralai/Mixtral-8x22B-v0.1": 39.0,
            "deepseek-ai/DeepSeek-V3": 37.0}


def test_every_shipped_llm_has_a_published_size():
    assert set(shipped_llm_names()) == set(PUBLISHED_B)


@pytest.mark.parametrize("repo", sorted(PUBLISHED_B))
def test_parameter_count_within_two_percent_of_published(repo):
    total = arch_from_config(load_config("hf:" + repo)).param_counts().total
    assert total / 1e9 == pytest.approx(PUBLISHED_B[repo], rel=0.02)


@pytest.mark.parametrize("repo", sorted(ACTIVE_B))
def test_moe_activated_parameters_near_published(repo):
    # model cards round and differ on whether the input embedding counts: 5%
    active = arch_from_config(load_config("hf:" + repo)).param_counts().active
    assert active / 1e9 == pytest.approx(ACTIVE_B[repo], rel=0.05)


def test_config_files_are_named_after_the_repo_and_are_plain_json():
    llms = [p for p in CONFIG_DIR.glob("*.json") if is_llm(Workload("hf:" + p.stem.replace("--", "/", 1)))]
    assert {"Qwen--Qwen2.5-7B.json", "meta-llama--Llama-3.1-8B.json"} <= {p.name for p in llms}
    for path in llms:
        assert "--" in path.stem
        assert json.loads(path.read_text()).get("model_type")


def test_instruct_and_chat_names_resolve_to_the_base_architecture():
    assert config_path_for("hf:Qwen/Qwen2.5-7B-Instruct").name == "Qwen--Qwen2.5-7B.json"
    assert config_path_for("hf:meta-llama/Llama-2-7b-chat-hf").name == "meta-llama--Llama-2-7b-hf.json"
    assert config_path_for("hf:meta-llama/Llama-3.1-8B-Instruct").name == "meta-llama--Llama-3.1-8B.json"
    assert config_path_for("hf:google/gemma-2-9b-it").name == "google--gemma-2-9b.json"


def test_unknown_llm_names_the_value_and_suggests():
    with pytest.raises(LlmError, match=r"Qwen2\.5-7X.*did you mean"):
        load_config("hf:Qwen/Qwen2.5-7X")


def test_a_config_json_path_is_an_llm(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(load_config("hf:Qwen/Qwen2.5-0.5B")))
    assert is_llm(Workload(f"hf:{path}"))
    assert is_llm(Workload(str(path)))


def test_encoders_and_vision_models_are_not_llms(tmp_path):
    path = tmp_path / "bert.json"
    path.write_text(json.dumps({"architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 768,
                                "num_hidden_layers": 12, "num_attention_heads": 12, "vocab_size": 30522}))
    assert not is_llm(Workload(f"hf:{path}"))
    assert not is_llm(Workload("torchvision:resnet50"))
    assert not is_llm(Workload("hf:no-such-model"))


def test_an_mpt_config_is_read_by_its_own_key_names():
    """Was: MPT's config (d_model, n_heads, n_layers, expansion_ratio) was not read: 'lacks num_hidden_layers'.
    MPT-7B: 6,649,286,656 parameters (its model card); MPT's MLP is GELU, not gated, under LayerNorm."""
    arch = arch_from_config(load_config("hf:mosaicml/mpt-7b"))
    assert arch.param_counts().total == pytest.approx(6_649_286_656, rel=1e-4)
    assert (arch.num_layers, arch.num_heads, arch.intermediate_size) == (32, 32, 16384)
    assert not arch.gated_mlp and arch.layernorm and [s.name for s in arch.linears] == [
        "Wqkv", "out_proj", "up_proj", "down_proj"]
    gqa = {**load_config("hf:mosaicml/mpt-7b"), "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 8}}
    assert arch_from_config(gqa).num_kv_heads == 8
    # transformers' MPT has no SDPA attention: its jobs are traced (the closed form would assume SDPA)
    assert not is_llm(Workload("hf:mosaicml/mpt-7b"))
