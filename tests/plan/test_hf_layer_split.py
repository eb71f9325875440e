"""HF generate on several GPUs splits the model by layers, not by tensor parallelism (a new user's trial): a
65B LLaMA served with ``--engine hf --num-gpus 2`` on H100s was timed as 2-way tensor parallelism (54 ms a token
against 67 on one GPU's bandwidth). transformers with ``device_map="auto"`` places consecutive layers on each
GPU and runs them one after another: each token still reads every weight, one GPU at a time, so a token takes
about one GPU's time for all the weights plus a hand-off of the hidden states a boundary; the memory splits by
layers. vLLM stays tensor parallel."""

from __future__ import annotations

import json

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import topology_for
from gpuwise.memory.llm import infer_memory, inference_weight_bytes
from gpuwise.plan.llm import estimate_llm
from gpuwise.plan.profile import ClosedFormLlmModel
from gpuwise.runtime.llm import decode_step, layer_handoffs_s, prefill_parts
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch
from gpuwise.workload.parallelism import layer_split_weight_bytes, splits_layers

LLAMA_65B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
             "intermediate_size": 22016, "num_attention_heads": 64, "num_hidden_layers": 80,
             "num_key_value_heads": 64, "vocab_size": 32000, "max_position_embeddings": 2048,
             "rms_norm_eps": 1e-05, "torch_dtype": "float16", "hidden_act": "silu", "tie_word_embeddings": False}


@pytest.fixture(scope="module")
def h100():
    return resolve_gpu(load_catalog(user_file=False), "h100-sxm")


@pytest.fixture(scope="module")
def model_65b(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama65b") / "config.json"
    path.write_text(json.dumps(LLAMA_65B))
    return f"hf:{path}"


def _job(model: str, engine: str, count: int, batch: int = 1) -> Workload:
    return Workload(model, mode="infer", seq_len=512, max_new_tokens=128, batch_size=batch, engine=engine,
                    precision="fp16", num_gpus=count)


def test_only_hf_generate_on_several_gpus_splits_by_layers(model_65b):
    assert splits_layers(_job(model_65b, "hf", 2))
    assert not splits_layers(_job(model_65b, "hf", 1))
    assert not splits_layers(_job(model_65b, "vllm", 2))


@pytest.mark.parametrize("batch", [1, 16])
def test_a_token_takes_one_gpus_time_for_all_the_weights_and_a_hand_off(model_65b, h100, batch):
    arch = load_arch(model_65b)
    one, two = _job(model_65b, "hf", 1, batch), _job(model_65b, "hf", 2, batch)
    total = inference_weight_bytes(arch, one)
    kw = dict(context_tokens=576, batch=batch, kv_bytes_per_element=2.0)
    alone = decode_step(arch, one, h100, weights_bytes=total, **kw)
    split = decode_step(arch, two, h100, weights_bytes=total / 2, **kw)
    hand_off = layer_handoffs_s(arch, two, batch, topology_for(h100))
    assert 0 < hand_off < 1e-4
    assert split.gpu_s == pytest.approx(alone.gpu_s + hand_off)      # no faster than one GPU: was 54 ms vs 67
    assert split.step_s >= alone.step_s
    assert split.tp_comm_s == pytest.approx(hand_off)
    # the prefill too: the whole forward, one GPU after another
    pre_kw = dict(prompt_tokens=512, batch=batch)
    assert prefill_parts(arch, two, h100, weights_bytes=total / 2, **pre_kw).ttft_s == pytest.approx(
        prefill_parts(arch, one, h100, weights_bytes=total, **pre_kw).ttft_s
        + layer_handoffs_s(arch, two, 512 * batch, topology_for(h100)))
    # vLLM's tensor parallelism does run faster per token on two GPUs
    vllm_one = decode_step(arch, _job(model_65b, "vllm", 1, batch), h100, weights_bytes=total, **kw)
    vllm_two = decode_step(arch, _job(model_65b, "vllm", 2, batch), h100, weights_bytes=total / 2, **kw)
    assert vllm_two.step_s < 0.75 * vllm_one.step_s


def test_the_memory_splits_by_layers(h100):
    """Qwen2.5-7B (28 layers, 4 KV heads) on 8 GPUs: tensor parallelism copies the 4 KV heads (a quarter of the
    cache on each GPU); a layer split holds the KV cache of its 4 layers (a seventh); each GPU runs whole layers,
    so its prefill activations are not divided."""
    model = "hf:Qwen/Qwen2.5-7B"
    arch = load_arch(model)
    kw = dict(prompt_tokens=1024, new_tokens=256, batch=4, kv_bytes_per_element=2.0)
    one = infer_memory(arch, _job(model, "hf", 1), h100, **kw)
    hf = infer_memory(arch, _job(model, "hf", 8), h100, **kw)
    vllm = infer_memory(arch, _job(model, "vllm", 8), h100, **kw)
    assert hf.kv_cache_bytes == pytest.approx(one.kv_cache_bytes * 4 / 28)
    assert vllm.kv_cache_bytes == pytest.approx(one.kv_cache_bytes / 4)
    assert hf.prefill_bytes == pytest.approx(one.prefill_bytes)
    # the fullest GPU: its 4 of the 28 layers' weights and the larger end (tests/plan/test_layer_split_placement.py)
    assert hf.weights_bytes == pytest.approx(layer_split_weight_bytes(arch, _job(model, "hf", 8), one.weights_bytes))
    assert hf.weights_bytes > one.weights_bytes / 7
    assert any("device_map" in n for n in hf.memory.notes)
    assert not any("tensor parallelism" in n for n in hf.memory.notes)


def test_any_count_up_to_the_layers_is_accepted_for_hf_generate():
    """vLLM refuses 8-way tensor parallelism of Qwen2.5-7B's 28 heads; a layer split does not need the heads to
    divide."""
    vllm = ClosedFormLlmModel(_job("hf:Qwen/Qwen2.5-7B", "vllm", 1))
    hf = ClosedFormLlmModel(_job("hf:Qwen/Qwen2.5-7B", "hf", 1))
    assert vllm.count_refusal(8) is not None
    assert hf.count_refusal(8) is None
    assert hf.count_refusal(29) is not None


def test_the_estimate_says_how_hf_generate_splits(model_65b, h100):
    est = estimate_llm(_job(model_65b, "hf", 2), h100)
    assert any("one GPU after another" in w for w in est.time.warnings)
    one = estimate_llm(_job(model_65b, "hf", 1), h100)
    assert est.inference.time_per_output_token_s >= one.inference.time_per_output_token_s
