"""The KV cache of models whose every layer attends within a sliding window (Mistral 7B v0.1, Phi-3 4k): HF
generate's cache keeps only the window, and the closed form sizes it as the real transformers cache holds it."""

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

from gpuwise.workload.decoder import arch_from_config, load_arch
from .tiny import TINY

WINDOW_TOKENS = 8
CONTEXT_TOKENS = 40


def _cache_bytes_after_generating(cfg: dict, context_tokens: int) -> int:
    """Bytes the real transformers DynamicCache of ``cfg``'s model holds after a prompt and one-token decode steps
    up to ``context_tokens`` (generate builds its cache from the model's config the same way)."""
    kwargs = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    config = AutoConfig.for_model(cfg["model_type"], **kwargs)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16).eval()
    cache = DynamicCache(config=config)
    prompt = context_tokens // 2
    with torch.no_grad():
        model(torch.randint(0, cfg["vocab_size"], (1, prompt)), past_key_values=cache, use_cache=True)
        for _ in range(context_tokens - prompt):
            model(torch.randint(0, cfg["vocab_size"], (1, 1)), past_key_values=cache, use_cache=True)
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


@pytest.mark.parametrize("cfg", [
    {**TINY["mistral"], "sliding_window": WINDOW_TOKENS},
    {**TINY["phi3"], "sliding_window": WINDOW_TOKENS},
    {**TINY["qwen2"], "use_sliding_window": True, "sliding_window": WINDOW_TOKENS, "max_window_layers": 1},
    {**TINY["qwen2"], "use_sliding_window": False, "sliding_window": WINDOW_TOKENS},
], ids=["mistral", "phi3", "qwen2-window-from-layer-1", "qwen2-window-off"])
def test_kv_cache_is_what_transformers_cache_holds_past_the_window(cfg):
    arch = arch_from_config(cfg)
    real = _cache_bytes_after_generating(cfg, CONTEXT_TOKENS)
    predicted = arch.kv_cache_bytes(CONTEXT_TOKENS, bytes_per_element=2, mla_latent=True)
    # a sliding layer keeps window - 1 tokens between steps (window while it appends one): within one token a layer
    assert abs(predicted - real) <= arch.num_layers * 2 * arch.num_kv_heads * arch.head_dim * 2


def test_mistral_7b_v01_cache_stops_at_its_4096_token_window():
    v01, v03 = load_arch("hf:mistralai/Mistral-7B-v0.1"), load_arch("hf:mistralai/Mistral-7B-v0.3")
    per_token_bytes = 2 * 32 * 8 * 128 * 2
    assert v01.kv_cache_bytes(16384, mla_latent=True) == 4096 * per_token_bytes
    assert v03.kv_cache_bytes(16384, mla_latent=True) == 16384 * per_token_bytes     # v0.3 has no window
