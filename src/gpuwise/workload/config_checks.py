"""What a model config (a transformers ``config.json``) must hold before any size is read from it.

A config is user input: a JSON list, ``NaN`` (which Python's json accepts), a negative hidden size or a
layer count of 1e9 would otherwise become a traceback or a confident estimate of nonsense. Every reader of
config files (the traced path in ``specs``, the LLM closed form) calls :func:`check_config` first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpuwise.workload.errors import WorkloadError

# Every size a config may give, bounded by what a real model has, with margin (largest published value in
# the comment). A bound keeps a typo or a hostile file (num_hidden_layers: 10**9) from becoming an hour-long
# trace that grows without limit; a real model past one is a reason to raise it here, not to drop it.
_LAYERS = 4_096        # DeepNet trained 1,000-layer transformers; Llama 3.1 405B has 126, PaLM 118
_WIDTH = 65_536        # d_model: MT-NLG 530B 20,480, PaLM 18,432, Llama 3.1 405B 16,384
_FFN = 262_144         # FFN width: PaLM 73,728, Llama 3.1 405B 53,248, GPT-3 49,152
_HEADS = 8_192         # heads, KV groups, experts per token: MT-NLG / Llama 405B / DeepSeek-V3 128
_VOCAB = 2_000_000     # XLM-V 901,629; Gemma and PaLM 256,000
_POSITIONS = 2**28     # context: Llama 4 Scout's config says 10,485,760 (10M)
_IMAGE = 16_384        # pixels a side (SAM 1,024, high-resolution ViTs a few thousand)
_CHANNELS = 4_096      # input channels (RGB 3, hyperspectral a few hundred)
# The names configs give the main sizes under (HF's, GPT-2's, MPT's, BLOOM's n_embed, GPT-Neo's num_heads,
# XGLM's attention_heads), in the order they are read: one home for the decoder's shape rule
# (llm_config.is_decoder_config) and its reader (decoder.arch_from_config)
HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model", "n_embed")
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads")
SIZE_BOUNDS = {
    **dict.fromkeys((*LAYER_KEYS, "encoder_layers", "decoder_layers"), _LAYERS),
    **dict.fromkeys((*HIDDEN_KEYS, "d_kv", "head_dim", "kv_lora_rank", "q_lora_rank",
                     "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"), _WIDTH),
    **dict.fromkeys(("intermediate_size", "n_inner", "d_ff", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim",
                     "moe_intermediate_size", "shared_expert_intermediate_size", "ffn_hidden_size"), _FFN),
    **dict.fromkeys((*HEAD_KEYS, "num_key_value_heads", "num_kv_heads", "encoder_attention_heads", "kv_n_heads",
                     "decoder_attention_heads", "num_experts_per_tok", "multi_query_group_num"), _HEADS),
    **dict.fromkeys(("vocab_size", "padded_vocab_size"), _VOCAB),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "seq_length", "max_seq_len"), _POSITIONS),
    **dict.fromkeys(("image_size", "patch_size"), _IMAGE),
    "num_channels": _CHANNELS,
}
# Sizes that are counts or widths: whole numbers from 1 to their bound where given (null means "not set").
SIZE_KEYS = frozenset(SIZE_BOUNDS)
MAX_DEPTH = 20             # nested sub-configs (text_config, vision_config) are a few levels deep


def check_config(config: Any, source: str) -> Mapping[str, Any]:
    """``config`` when it is a JSON object whose numbers are finite and whose sizes (``SIZE_KEYS``, in any
    nested sub-config) are whole numbers from 1 to their bound (``SIZE_BOUNDS``); WorkloadError naming ``source`` and the
    key otherwise."""
    if not isinstance(config, Mapping):
        raise WorkloadError(f"{source}: a model config is a JSON object, not a {type(config).__name__}")
    _check(config, source, "", 0)
    return config


def _check(value: Any, source: str, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise WorkloadError(f"{source}: config nested more than {MAX_DEPTH} levels deep at {where or 'top'}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            at = f"{where}.{key}" if where else str(key)
            if key in SIZE_BOUNDS and item is not None:
                _check_size(item, source, at, SIZE_BOUNDS[key])
            _check(item, source, at, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, source, f"{where}[{i}]", depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise WorkloadError(f"{source}: {where} is {value}, not a finite number")


def _check_size(value: Any, source: str, at: str, maximum: int) -> None:
    whole = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, list):  # per-layer sizes (some configs list one per layer)
        for i, item in enumerate(value):
            _check_size(item, source, f"{at}[{i}]", maximum)
        return
    if not whole or not 1 <= value <= maximum:
        raise WorkloadError(f"{source}: {at} is {str(value)[:40]!r}, not a whole number from 1 to {maximum:,} "
                            "(the largest a real model has, with margin)")
