"""Finding a decoder LLM's HF config for a model spec (``hf:NAME``, ``hf:path/config.json``, ``path.json``).

``gpuwise.workload.specs`` resolves every kind of model spec; this module finds the config dict of
``hf:`` decoder LLMs for the closed form, and answers ``is_llm`` without building anything. Names match
the shipped files (``Qwen/Qwen2.5-7B`` -> ``Qwen--Qwen2.5-7B.json``), then the Hub (workload/hub.py);
when the Hub cannot answer, a name that differs only by a fine-tune suffix (``-Instruct``, ``-chat-hf``,
``-it``) shares the base model's architecture, so it resolves to the base file, as model specs do
(``gpuwise.workload.specs.finetune_base``).
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from pathlib import Path

from gpuwise.errors import did_you_mean
from gpuwise.workload.config_checks import LAYER_KEYS, check_config
from gpuwise.workload.decoder_configs import is_decoder_config, windows_layers
from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.hub import hub_config
from gpuwise.workload.specs import CONFIG_DIR, as_config_file, finetune_base_config, shipped_config_path


def shipped_llm_names() -> list[str]:
    """HF repo ids of the shipped decoder configs (``Qwen/Qwen2.5-7B``...)."""
    names = []
    for path in sorted(CONFIG_DIR.glob("*.json")):
        cfg = _read(path)
        if cfg is not None and is_decoder_config(cfg):
            names.append(path.stem.replace("--", "/", 1))
    return names


def _read(path: Path) -> dict | None:
    try:
        return check_config(json.loads(path.read_text()), str(path))  # a bad config is no LLM: specs names why
    except (OSError, ValueError, RecursionError, WorkloadError):
        return None


def config_path_for(spec: str) -> Path | None:
    """The config file a spec names, or None when the spec is not an ``hf:``/JSON spec we can find."""
    name = spec[3:] if spec.startswith("hf:") else spec
    path = as_config_file(Path(name).expanduser())
    if path.suffix == ".json":
        return path if path.is_file() else None
    if not spec.startswith("hf:"):
        return None
    exact = CONFIG_DIR / (name.replace("/", "--") + ".json")
    if exact.is_file():
        return exact
    lowered = {p.stem.lower(): p for p in CONFIG_DIR.glob("*.json")}
    hit = lowered.get(name.replace("/", "--").lower())
    if hit is not None:
        return hit

    # Any Hub id next (the user's cache, then the Hub); without the Hub's answer, the shipped configs
    # as gpuwise.workload.specs resolves them (a fine-tune's base config among them).
    path, why = hub_config(name)
    return path or shipped_config_path(name) or finetune_base_config(name, why)


def load_config(spec: str) -> dict:
    """The HF config dict for ``spec``; WorkloadError naming the spec (with suggestions) when it is unknown."""
    path = config_path_for(spec)
    if path is None:
        name = spec[3:] if spec.startswith("hf:") else spec
        if name.endswith(".json"):
            raise WorkloadError(f"model config file not found: {name!r}")
        choices = shipped_llm_names()
        raise WorkloadError(f"unknown LLM {spec!r}{did_you_mean(name, choices)}; pass hf:path/to/config.json for others")
    cfg = _read(path)
    if cfg is None:
        raise WorkloadError(f"{str(path)!r} is not a readable JSON config")
    return cfg


def try_load_decoder_config(spec: str) -> dict | None:
    """The config when ``spec`` names a decoder LLM we can find; None otherwise (never raises)."""
    try:
        path = config_path_for(spec)
    except (OSError, ValueError, WorkloadError):  # a gated Hub model: resolving the spec says how to log in
        return None
    if path is None:
        return None
    cfg = _read(path)
    return cfg if cfg is not None and is_decoder_config(cfg) else None


def request_rate_refusal(model: str) -> str | None:
    """Why ``--request-rate`` cannot load ``model``: only a decoder LLM the closed form describes is served at a
    rate (``decoder.is_llm``: ``try_load_decoder_config``); None where it is one. Said before what the rate needs
    (--mode infer, --max-new-tokens), so that a user is not sent to add flags for a model that never takes them."""
    if try_load_decoder_config(model) is not None:
        return None
    return (f"--request-rate sizes serving a decoder LLM (the closed form): {model} is not one (it is traced; "
            "--batch-size N sizes one batch of it)")


# Optional fields the closed form reads (``decoder.arch_from_config``) where a config may leave them out, each with
# the keys it reads them from (a field is given when any of them is: GPT-2's n_positions is its context); the
# required ones (hidden size, layers, heads) are refused when missing, never guessed.
DEFAULTED_FIELDS = {
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim", "expansion_ratio"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "seq_length", "model_max_length",
                                "max_seq_len"),
}
# Not asked: a missing num_key_value_heads is multi-head attention in transformers and here alike, and a missing
# tie_word_embeddings is PretrainedConfig's True here as there (a class whose default differs, LlamaConfig's
# False, writes the key into every config it saves).
# Asked only of a mixture of experts (a config with one of EXPERT_KEYS): how many experts a token takes.
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
DEFAULTED_MOE_FIELDS = {"num_experts_per_tok": ("num_experts_per_tok", "moe_topk")}
# Asked only of a model whose layers transformers windows (``decoder_configs.windows_layers``): the window, which
# MistralConfig, Qwen2/3's (with use_sliding_window) and Gemma 2/3's default to 4096 where a config leaves it out
# (an explicit null is no window, as there); Phi-3's, Mixtral's and Starcoder2's default to none.
DEFAULTED_WINDOW_FIELDS = {"sliding_window": ("sliding_window",)}


def missing_fields(cfg: dict) -> tuple[str, ...]:
    """The optional fields ``cfg`` gives under none of their keys (``DEFAULTED_FIELDS``; a mixture of experts' and a
    windowed model's too)."""
    fields = dict(DEFAULTED_FIELDS)
    if any(k in cfg for k in EXPERT_KEYS):
        fields.update(DEFAULTED_MOE_FIELDS)
    layers = int(next((cfg[k] for k in LAYER_KEYS if cfg.get(k)), 0))
    if windows_layers(cfg, str(cfg.get("model_type") or "").lower(), layers):
        fields.update(DEFAULTED_WINDOW_FIELDS)
    return tuple(f for f, keys in fields.items() if not any(k in cfg for k in keys))


def transformers_defaults(cfg: dict) -> dict:
    """The optional fields a config leaves out (``missing_fields``), as transformers fills them: its model type's
    config class (``CONFIG_MAPPING``) built offline from the config's own values, so that the defaults are the ones
    the model is built with (LlamaConfig: intermediate_size 11008, max_position_embeddings 2048). {} for an unknown
    model type, where transformers cannot build the class from the dict, or where nothing is missing: a complete
    config never imports transformers (a closed-form estimate stays free of torch)."""
    missing = missing_fields(cfg)
    if not cfg.get("model_type") or not missing:
        return {}
    return dict(_class_defaults(json.dumps(cfg, sort_keys=True, default=str), missing))


@lru_cache(maxsize=64)
def _class_defaults(cfg_json: str, missing: tuple[str, ...]) -> tuple[tuple[str, object], ...]:
    cfg = json.loads(cfg_json)
    quiet = logging.getLogger("transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)       # its own validation chatter (rope_scaling fields) is not ours to print
    try:
        from transformers import CONFIG_MAPPING

        if cfg["model_type"] not in CONFIG_MAPPING:
            return ()
        config = CONFIG_MAPPING[cfg["model_type"]](**{k: v for k, v in cfg.items() if k != "model_type"})
    except Exception:       # a config transformers itself refuses: keep the closed form's own reading
        return ()
    finally:
        quiet.setLevel(level)
    return tuple((key, value) for key in missing
                 if isinstance(value := getattr(config, key, None), (int, float, bool)))
