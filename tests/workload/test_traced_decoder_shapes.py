"""The shape of decoders gpuwise traces (GPT-2, OPT, BLOOM, Falcon, GPT-Neo, StarCoder …), read from their configs
by decoder.arch_from_config for the KV cache of their generation (plan.generation): their own names for the sizes,
and their KV heads (Falcon and StarCoder cache one K and V head under multi-query attention)."""

import pytest

from gpuwise.workload.decoder import arch_from_config, load_arch


def test_gpt2_xl_caches_2_x_48_layers_x_1600_a_token():
    arch = load_arch("hf:gpt2-xl")
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim) == (48, 25, 64)
    # fp32, 16 sequences of 512 + 512 tokens: the report's ~10 GB
    assert arch.kv_cache_bytes(1024, 16, 4.0, mla_latent=True) == 2 * 48 * 1600 * 4 * 16 * 1024


@pytest.mark.parametrize(("config", "shape"), [
    # BLOOM's configs name the width n_embed
    ({"model_type": "bloom", "n_embed": 1024, "n_layer": 24, "num_attention_heads": 16, "vocab_size": 250880},
     (1024, 24, 16, 16, 64)),
    # GPT-Neo: num_layers and num_heads
    ({"model_type": "gpt_neo", "hidden_size": 2048, "num_layers": 24, "num_heads": 16, "vocab_size": 50257},
     (2048, 24, 16, 16, 128)),
    # XGLM: d_model and attention_heads
    ({"model_type": "xglm", "d_model": 1024, "num_layers": 24, "attention_heads": 16, "ffn_dim": 4096,
      "vocab_size": 256008}, (1024, 24, 16, 16, 64)),
    # Falcon-7B: multi-query attention (one K and V head for 71 query heads)
    ({"model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
      "multi_query": True, "vocab_size": 65024}, (4544, 32, 71, 1, 64)),
    # Falcon-40B: the new decoder architecture, 8 KV heads
    ({"model_type": "falcon", "hidden_size": 8192, "num_hidden_layers": 60, "num_attention_heads": 128,
      "num_kv_heads": 8, "new_decoder_architecture": True, "vocab_size": 65024}, (8192, 60, 128, 8, 64)),
    # StarCoder (gpt_bigcode): multi-query by default
    ({"model_type": "gpt_bigcode", "n_embd": 6144, "n_layer": 40, "n_head": 48, "vocab_size": 49152},
     (6144, 40, 48, 1, 128)),
])
def test_traced_decoders_configs_give_their_kv_cache_shape(config, shape):
    arch = arch_from_config(config)
    assert (arch.hidden_size, arch.num_layers, arch.num_heads, arch.num_kv_heads, arch.head_dim) == shape


def test_ffn_dim_is_the_mlp_width_of_opt_and_xglm():
    config = {"model_type": "opt", "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
              "ffn_dim": 3072, "vocab_size": 50272}
    assert arch_from_config(config).intermediate_size == 3072     # not the 4 × hidden default
