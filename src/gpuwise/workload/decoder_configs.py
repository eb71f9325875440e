"""Which HF configs are decoder-only language models the closed form describes (a config dict alone: no file,
no Hub), for ``llm_config`` (which finds configs) and ``specs`` (which decides how a model is built)."""

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
