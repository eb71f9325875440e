"""Which HF configs are decoder-only language models the closed form describes (a config dict alone: no file,
no Hub), for ``llm_config`` (which finds configs) and ``specs`` (which decides how a model is built); and which of
their layers attend within a sliding window, for ``decoder`` (the KV cache) and ``llm_config`` (a left-out window)."""

from __future__ import annotations

from gpuwise.workload.config_checks import HIDDEN_KEYS, LAYER_KEYS


# model_type values that are not decoder-only LLMs even though they carry hidden_size/num_layers.
_NOT_DECODERS = {
    "bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2", "t5",
    "mt5", "bart", "mbart", "pegasus", "marian", "vit", "clip", "whisper", "wav2vec2", "siglip",
    "siglip_vision_model", "convnext", "swin", "beit", "deit", "mpnet", "longformer", "umt5",
    # decoders the closed form does not describe (learned position tables, Conv1D projections,
    # OPT's projections): gpuwise traces these instead
    "gpt2", "opt", "bloom", "gptj", "gpt_bigcode", "falcon", "codegen", "xglm", "biogpt", "gpt_neo",
    # transformers' MptAttention has no SDPA path (modeling_mpt.py: scores materialised, ALiBi added), which
    # the closed form's SDPA default would undercount (MPT-7B LoRA at 2048 tokens: 26.6 GiB against the
    # trace's 50.5); the closed form still reads MPT's shape (decoder.arch_from_config) for MPT's own stack
    "mpt",
}


def text_config(cfg: dict) -> dict:
    """The language-model part of a config (multimodal configs nest it under ``text_config``)."""
    inner = cfg.get("text_config")
    if isinstance(inner, dict) and inner.get("hidden_size"):
        return inner
    return cfg


CAUSAL_ARCH_SUFFIXES = ("ForCausalLM", "LMHeadModel")
# The sizes every causal LM's config states (under one of their keys): a missing one is never guessed, whether the
# closed form or the tracer (which would take transformers' class default, LlamaConfig's 32 layers) reads it
_REQUIRED_DECODER_SIZES = {"hidden_size": HIDDEN_KEYS, "num_hidden_layers": LAYER_KEYS}


def missing_decoder_sizes(cfg: dict) -> tuple[str, ...]:
    """The sizes (``_REQUIRED_DECODER_SIZES``) a causal language model's config leaves out; () for a config that
    gives them all or names no causal-LM architecture."""
    archs = [str(a) for a in (cfg.get("architectures") or [])]
    if not any(a.endswith(CAUSAL_ARCH_SUFFIXES) for a in archs):
        return ()
    text = text_config(cfg)
    return tuple(name for name, keys in _REQUIRED_DECODER_SIZES.items() if not any(text.get(k) for k in keys))


# vLLM's length keys (config.py's _get_and_verify_max_len): the smallest one a config gives is its limit
VLLM_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                    "max_sequence_length", "max_seq_length", "seq_len")
# rope types whose factor vLLM does not multiply into the length (the config's length already includes it)
_ROPE_TYPES_UNSCALED = ("su", "longrope", "llama3")


def vllm_max_model_len(cfg: dict) -> int:
    """The longest prompt + new tokens vLLM starts with for this config (0: it states no length), as its
    _get_and_verify_max_len derives it: the smallest of the length keys (``model_max_length`` where given), times
    a rope scaling factor (from ``original_max_position_embeddings`` for yarn) except for the rope types that already
    count it and Gemma 3."""
    text = text_config(cfg)
    lengths = [int(text[k]) for k in VLLM_LENGTH_KEYS if isinstance(text.get(k), (int, float)) and text[k] > 0]
    if not lengths:
        return 0
    length = float(min(lengths))
    if isinstance(text.get("model_max_length"), (int, float)) and text["model_max_length"] > 0:
        # vLLM then takes model_max_length where a config states it (its case for Command-R / Cohere / Aya, written
        # for any config), even above the positions
        length = float(text["model_max_length"])
    rope = text.get("rope_scaling")
    model_type = str(text.get("model_type") or cfg.get("model_type") or "")
    if isinstance(rope, dict) and "gemma3" not in model_type:
        rope_type = rope.get("rope_type", rope.get("type"))
        if rope_type not in _ROPE_TYPES_UNSCALED and "factor" in rope:
            if rope_type == "yarn":
                length = float(rope.get("original_max_position_embeddings", length))
            length *= float(rope["factor"])
    return int(length)


def vision_tower_params(cfg: dict) -> int:
    """Parameters of the ViT vision tower a multimodal config describes in its ``vision_config`` (0: none, or one
    without the sizes), as transformers' SigLIP vision transformer builds it: per encoder layer the q, k, v and o
    projections with biases (4·h² + 4·h), the MLP (2·h·i + i + h) and two LayerNorms (4·h); the patch embedding,
    a convolution over the image's channels (c·p²·h + h); the position table ((image / p)²·h); the final LayerNorm
    (2·h). The pooling head (``vision_use_head``, off in Gemma 3) and the projector into the language model are
    not counted."""
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return 0
    h, i = int(v.get("hidden_size") or 0), int(v.get("intermediate_size") or 0)
    layers, patch, image = int(v.get("num_hidden_layers") or 0), int(v.get("patch_size") or 0), int(v.get("image_size") or 0)
    if not (h and i and layers and patch and image):
        return 0
    per_layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    patches = (image // patch) ** 2
    return layers * per_layer + int(v.get("num_channels") or 3) * patch * patch * h + h + patches * h + 2 * h


def is_decoder_config(cfg: dict) -> bool:
    """True for configs of decoder-only (causal) language models that the closed form can describe."""
    text = text_config(cfg)
    model_type = str(text.get("model_type", cfg.get("model_type", ""))).lower()
    if model_type in _NOT_DECODERS or cfg.get("is_encoder_decoder"):
        return False
    archs = [str(a) for a in (cfg.get("architectures") or [])]
    causal = any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in archs)
    causal = causal or model_type in ("chatglm", "baichuan", "internlm2", "gemma3_text")
    has_shape = any(text.get(k) for k in HIDDEN_KEYS) and any(text.get(k) for k in LAYER_KEYS)
    has_vocab = bool(text.get("vocab_size") or text.get("padded_vocab_size"))
    return causal and has_shape and has_vocab


# Model types whose config keeps ``sliding_window`` and whose every layer attends within it: transformers' config
# class writes no ``layer_types``, so its DynamicCache (cache_utils, 4.56+) gives every layer a sliding-window layer
# that keeps only the window (Mistral 7B v0.1: 4096; Phi-3 4k: 2047). Qwen's MoE classes keep the window only
# with use_sliding_window.
_SLIDING_EVERY_LAYER = {"mistral", "mixtral", "phi3", "starcoder2", "qwen2_moe", "qwen3_moe"}
_SLIDING_IF_ASKED = {"qwen2", "qwen3", "qwen2_moe", "qwen3_moe"}   # their classes drop the window without use_sliding_window


def sliding_window_layers(c: dict, model_type: str, layers: int) -> tuple[int, int]:
    """(window in tokens, layers whose KV cache stops at it) as transformers builds the model's cache: the config's
    own ``layer_types`` where it lists them; Gemma 2's alternate and Gemma 3's 5 local : 1 global layers; Qwen2/3's
    layers from ``max_window_layers`` on (their config classes' layer_types); every layer of the types in
    ``_SLIDING_EVERY_LAYER``. (0, 0): no window, or one the model type does not apply. A window the config leaves
    out is its config class's default (``llm_config.transformers_defaults``, asked where ``windows_layers``)."""
    window = int(c.get("sliding_window") or 0)
    if not window or (model_type in _SLIDING_IF_ASKED and not c.get("use_sliding_window")):
        return 0, 0
    if isinstance(types := c.get("layer_types"), list):
        sliding = sum(1 for t in types[:layers] if t in ("sliding_attention", "chunked_attention"))
    elif model_type == "gemma2":
        sliding = (layers + 1) // 2                       # even layers use the local window
    elif model_type in ("gemma3_text", "gemma3"):
        sliding = layers - layers // int(c.get("sliding_window_pattern") or 6)   # 5 local : 1 global
    elif model_type in ("qwen2", "qwen3"):
        sliding = layers - min(int(c.get("max_window_layers", 28)), layers)    # the first ones attend in full
    elif model_type in _SLIDING_EVERY_LAYER:
        sliding = layers
    else:
        sliding = 0
    return (window, sliding) if sliding else (0, 0)


def windows_layers(c: dict, model_type: str, layers: int) -> bool:
    """Whether transformers gives some of the model's layers a sliding window when its config has one
    (``sliding_window_layers`` of any window): where a config leaving ``sliding_window`` out takes its class's."""
    return sliding_window_layers({**c, "sliding_window": 1}, model_type, layers)[1] > 0
