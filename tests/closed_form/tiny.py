"""Tiny configs of each decoder family, in HF config.json form (small enough to build in milliseconds)."""

BASE = {"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 512}

TINY = {
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **BASE, "tie_word_embeddings": False},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", **BASE, "tie_word_embeddings": True},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **BASE, "head_dim": 32,
              "tie_word_embeddings": False},
    "mistral": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", **BASE, "tie_word_embeddings": False},
    "gemma2": {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", **BASE, "head_dim": 16,
               "tie_word_embeddings": True, "sliding_window": 128},
    "gemma3_text": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", **BASE, "head_dim": 16,
                    "tie_word_embeddings": True, "sliding_window": 128},
    "phi3": {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", **BASE, "tie_word_embeddings": False,
             "pad_token_id": 0},
    "phi": {"architectures": ["PhiForCausalLM"], "model_type": "phi", **BASE, "num_key_value_heads": 4,
            "tie_word_embeddings": False},
    "gpt_neox": {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", **BASE, "num_key_value_heads": 4,
                 "tie_word_embeddings": False},
    "mixtral": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **BASE, "num_local_experts": 4,
                "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "qwen2_moe": {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", **BASE, "num_experts": 4,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 96,
                  "decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": False},
    "qwen3_moe": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", **BASE, "head_dim": 32,
                  "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "decoder_sparse_step": 1,
                  "mlp_only_layers": [], "tie_word_embeddings": False},
    "deepseek_v3": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", **BASE,
                    "num_key_value_heads": 4, "num_hidden_layers": 3, "first_k_dense_replace": 1,
                    "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                    "q_lora_rank": 48, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
                    "v_head_dim": 16, "n_group": 1, "topk_group": 1, "tie_word_embeddings": False},
}


def build_meta(cfg: dict):
    """The real transformers module for a config dict, on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    config = AutoConfig.for_model(cfg["model_type"], **kwargs)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)
