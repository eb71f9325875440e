"""MLA's KV cache is what the engine keeps (new-user trial: DeepSeek-V2-Lite with ``--engine hf`` read "KV cache
1.0 GiB ... largest batch that fits 88" for 8 sequences of 4,352 tokens on an A100 80 GB).

vLLM keeps the compressed latent: one 576-wide "head" a layer and no V (0.10.1.1, ``v1/kv_cache_interface.py``
``AttentionSpec.page_size_bytes``, coef 1 with MLA; ``config.get_head_size``: kv_lora_rank + qk_rope_head_dim).
transformers before 5.15 (4.57.6: ``models/deepseek_v2/modeling_deepseek_v2.py:372-379``,
``deepseek_v3/modeling_deepseek_v3.py:413-421``) expands the roped key to every head, concatenates it to each
head's decompressed no-rope key, and hands the cache K [batch, heads, seq, qk_nope + qk_rope] and V [batch,
heads, seq, v_head_dim] at the activations' dtype (flash attention's V padding comes after the update).
transformers 5.15 and later cache the latent again (``expand_kv`` after ``past_key_values.update``).

The expected bytes are derived here from the shipped config's numbers, not from gpuwise.
"""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory.llm import infer_memory
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime.llm import DECODE_BW_EFF, decode_step
from gpuwise.workload import Workload
from gpuwise.workload import decoder
from gpuwise.workload.decoder import load_arch, mla_caches_latent
from gpuwise.workload.llm_config import load_config

V2_LITE = "hf:deepseek-ai/DeepSeek-V2-Lite"
BF16 = 2
PROMPT, NEW, BATCH = 4096, 256, 8


@pytest.fixture(scope="module")
def cfg():
    return load_config(V2_LITE)


@pytest.fixture(scope="module")
def a100():
    return resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")


@pytest.fixture
def transformers_4_57(monkeypatch):
    """HF generate as the pinned transformers (4.57.6) runs it, whatever is installed."""
    monkeypatch.setattr(decoder, "installed_transformers_version", lambda: "4.57.6")


def hf_bytes_per_token(cfg) -> int:
    """transformers < 5.15: per layer, K of heads x (qk_nope + qk_rope) and V of heads x v_head_dim."""
    heads = cfg["num_attention_heads"]
    k = heads * (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
    v = heads * cfg["v_head_dim"]
    return cfg["num_hidden_layers"] * (k + v) * BF16


def latent_bytes_per_token(cfg) -> int:
    """vLLM: per layer, the kv_lora_rank latent and the roped key, once (no V)."""
    return cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * BF16


def _w(engine: str, **kw) -> Workload:
    base = dict(mode="infer", batch_size=BATCH, seq_len=PROMPT, max_new_tokens=NEW, precision="bf16", engine=engine)
    base.update(kw)
    return Workload(V2_LITE, **base)


def test_the_config_numbers_give_276_kb_a_token_in_hf_and_31_kb_in_vllm(cfg):
    assert hf_bytes_per_token(cfg) == 27 * 16 * (128 + 64 + 128) * 2 == 276_480
    assert latent_bytes_per_token(cfg) == 27 * (512 + 64) * 2 == 31_104


def test_the_kv_rule_counts_each_layout_from_the_shapes(cfg):
    arch = load_arch(V2_LITE)
    assert arch.kv_cache_bytes_per_token(BF16, mla_latent=False) == hf_bytes_per_token(cfg)
    assert arch.kv_cache_bytes_per_token(BF16, mla_latent=True) == latent_bytes_per_token(cfg)
    assert arch.kv_cache_bytes(1000, 3, 1.0, mla_latent=False) == hf_bytes_per_token(cfg) // BF16 * 1000 * 3


def test_which_engines_cache_the_latent():
    assert not mla_caches_latent("hf", "4.57.6")
    assert not mla_caches_latent("hf", "5.14.1")       # the last release that caches decompressed K and V
    assert mla_caches_latent("hf", "5.15.0")
    assert mla_caches_latent("hf", "5.25.0")
    assert mla_caches_latent("hf", "5.15.0.dev0")
    assert not mla_caches_latent("hf", None)           # unknown: the pinned version's layout
    assert mla_caches_latent("vllm", "4.57.6") and mla_caches_latent("vllm", None)


def test_hf_generate_holds_the_decompressed_cache_and_vllm_the_latent(cfg, a100, transformers_4_57):
    """The trial's command: ``estimate hf:deepseek-ai/DeepSeek-V2-Lite --mode infer --seq-len 4096
    --max-new-tokens 256 --batch-size 8 --gpu a100-80gb-sxm4`` (was 1.0 GiB and a largest batch of 88)."""
    tokens = (PROMPT + NEW) * BATCH
    hf = estimate_llm(_w("hf"), a100).inference
    assert hf.kv_cache_bytes == hf_bytes_per_token(cfg) * tokens                 # 9.0 GiB
    assert hf.kv_cache_bytes_per_token == hf_bytes_per_token(cfg)
    # 80 GiB less 29.3 GiB of weights holds the caches of 45 sequences of 1.1 GiB at most, before any activation
    per_sequence = hf_bytes_per_token(cfg) * (PROMPT + NEW)
    assert hf.max_batch_size <= (80 * 2**30 - hf.weights_bytes) // per_sequence == 45
    vllm = estimate_llm(_w("vllm"), a100).inference
    assert vllm.kv_cache_bytes == latent_bytes_per_token(cfg) * tokens


def test_the_decode_step_reads_the_cache_the_engine_holds(cfg, a100, monkeypatch):
    """Only the cache differs between transformers 4.57 and 5.15's HF generate here: the step's memory time
    differs by reading the one cache or the other."""
    arch, w, context = load_arch(V2_LITE), _w("hf"), 4000
    steps = {}
    for version in ("4.57.6", "5.15.0"):
        monkeypatch.setattr(decoder, "installed_transformers_version", lambda v=version: v)
        steps[version] = decode_step(arch, w, a100, weights_bytes=10e9, context_tokens=context, batch=BATCH,
                                     kv_bytes_per_element=BF16)
    cache_bytes = (hf_bytes_per_token(cfg) - latent_bytes_per_token(cfg)) * context * BATCH
    read_s = cache_bytes / (a100.memory_bandwidth_gbs * 1e9 * DECODE_BW_EFF)
    assert steps["4.57.6"].memory_s - steps["5.15.0"].memory_s == pytest.approx(read_s, rel=1e-9)


def test_tensor_parallel_gpus_split_the_decompressed_heads_and_copy_the_latent(cfg, transformers_4_57):
    arch = load_arch(V2_LITE)
    sizes = dict(prompt_tokens=PROMPT, new_tokens=NEW, batch=BATCH, kv_bytes_per_element=BF16)
    assert arch.kv_cache_share(2, mla_latent=False) == 1 / 2          # tensor parallel: by head
    # HF generate on 2 GPUs splits by layers (workload.parallelism.splits_layers): the GPU with the most layers
    one, two = (infer_memory(arch, _w("hf", num_gpus=n), **sizes).kv_cache_bytes for n in (1, 2))
    layers = cfg["num_hidden_layers"]
    assert two == pytest.approx(one * -(-layers // 2) / layers)
    assert one == hf_bytes_per_token(cfg) * (PROMPT + NEW) * BATCH
    latent = infer_memory(arch, _w("vllm", num_gpus=2), **sizes).kv_cache_bytes
    assert latent == latent_bytes_per_token(cfg) * (PROMPT + NEW) * BATCH


def test_the_estimate_says_which_cache_it_counts(a100, transformers_4_57):
    hf = " ".join(estimate_llm(_w("hf"), a100).notes)
    assert "decompressed K and V" in hf and "16 × (128 + 64 + 128)" in hf
    assert "576-wide latent" in " ".join(estimate_llm(_w("vllm"), a100).notes)
