"""What a model config (a transformers ``config.json``) must hold before any size is read from it.

A config is user input: a JSON list, ``NaN`` (which Python's json accepts), a negative hidden size or a
layer count of 1e9 would otherwise become a traceback or a confident estimate of nonsense. Every reader of
config files (the traced path in ``specs``, the LLM closed form) calls :func:`check_config` first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpuwise.workload.model import WorkloadError

# Sizes that are counts or widths: whole numbers >= 1 where given (null means "not set").
SIZE_KEYS = frozenset({
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "padded_vocab_size", "max_position_embeddings", "n_positions", "n_embd", "n_layer", "n_head",
    "n_inner", "d_model", "d_ff", "d_kv", "num_layers", "num_heads", "head_dim", "ffn_dim", "encoder_layers",
    "decoder_layers", "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim",
    "moe_intermediate_size", "shared_expert_intermediate_size", "num_experts_per_tok", "kv_lora_rank",
    "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "image_size", "patch_size",
    "num_channels", "multi_query_group_num", "ffn_hidden_size", "seq_length",
})
MAX_SIZE = 2**31           # no width, count or vocabulary of a real model comes near this
MAX_DEPTH = 20             # nested sub-configs (text_config, vision_config) are a few levels deep


def check_config(config: Any, source: str) -> Mapping[str, Any]:
    """``config`` when it is a JSON object whose numbers are finite and whose sizes (``SIZE_KEYS``, in any
    nested sub-config) are whole numbers from 1 to ``MAX_SIZE``; WorkloadError naming ``source`` and the
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
            if key in SIZE_KEYS and item is not None:
                _check_size(item, source, at)
            _check(item, source, at, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check(item, source, f"{where}[{i}]", depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise WorkloadError(f"{source}: {where} is {value}, not a finite number")


def _check_size(value: Any, source: str, at: str) -> None:
    whole = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, list):  # per-layer sizes (some configs list one per layer)
        for i, item in enumerate(value):
            _check_size(item, source, f"{at}[{i}]")
        return
    if not whole or not 1 <= value <= MAX_SIZE:
        raise WorkloadError(f"{source}: {at} is {str(value)[:40]!r}, not a whole number from 1 to {MAX_SIZE}")
