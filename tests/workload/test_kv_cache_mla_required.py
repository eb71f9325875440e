"""``DecoderArch.kv_cache_bytes`` (and its per-token form) has no default for ``mla_latent``: an MLA cache is sized by the engine's answer
(``mla_caches_latent``), never by a default that silently picks the latent."""

import pytest

from gpuwise.workload.decoder import load_arch


@pytest.mark.parametrize("model", ["hf:deepseek-ai/DeepSeek-V2-Lite", "hf:meta-llama/Meta-Llama-3-8B"])
def test_kv_cache_bytes_needs_mla_latent(model):
    arch = load_arch(model)
    with pytest.raises(TypeError, match="mla_latent"):
        arch.kv_cache_bytes(1000, 2, 2.0)
    with pytest.raises(TypeError):
        arch.kv_cache_bytes(1000, 2, 2.0, True)        # keyword-only
    assert arch.kv_cache_bytes(1000, 2, 2.0, mla_latent=True) > 0
    with pytest.raises(TypeError, match="mla_latent"):
        arch.kv_cache_bytes_per_token(2.0)
    assert arch.kv_cache_bytes_per_token(2.0, mla_latent=True) > 0


def test_mla_latent_changes_an_mla_cache_only():
    v2, llama = load_arch("hf:deepseek-ai/DeepSeek-V2-Lite"), load_arch("hf:meta-llama/Meta-Llama-3-8B")
    assert v2.kv_cache_bytes(1000, mla_latent=True) < v2.kv_cache_bytes(1000, mla_latent=False)
    assert llama.kv_cache_bytes(1000, mla_latent=True) == llama.kv_cache_bytes(1000, mla_latent=False)
