"""A config.json that leaves ``sliding_window`` out gets the window transformers' config class gives it (MistralConfig:
4096), not none: the closed form reads the same window and windowed layers as the config transformers builds."""

from __future__ import annotations

import json

import pytest
from transformers import AutoConfig

from gpuwise.workload.decoder import defaulted_note, load_arch
from gpuwise.workload.llm_config import missing_fields
from .tiny import TINY


def _without_window(cfg: dict, **extra) -> dict:
    return {**{k: v for k, v in cfg.items() if k != "sliding_window"}, **extra}


def _transformers_window(cfg: dict) -> tuple[int, int]:
    """(window, layers it bounds) of the config transformers itself builds from ``cfg``: the layers its
    ``layer_types`` mark sliding, or every layer of a class that writes none (Mistral's: DynamicCache windows each)."""
    kwargs = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    config = AutoConfig.for_model(cfg["model_type"], **kwargs)
    window = int(getattr(config, "sliding_window", None) or 0)
    types = getattr(config, "layer_types", None)
    layers = sum(t == "sliding_attention" for t in types) if types else config.num_hidden_layers
    return (window, layers) if window and layers else (0, 0)


def _arch_of(tmp_path, cfg: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return load_arch(f"hf:{path}"), f"hf:{path}"


@pytest.mark.parametrize("cfg", [
    _without_window(TINY["mistral"]),
    _without_window(TINY["qwen2"], use_sliding_window=True, max_window_layers=1),
    _without_window(TINY["gemma2"]),
    _without_window(TINY["phi3"]),
    _without_window(TINY["qwen2"], use_sliding_window=False),
    _without_window(TINY["mistral"], sliding_window=None),
    TINY["llama"],
], ids=["mistral", "qwen2-window-from-layer-1", "gemma2", "phi3", "qwen2-window-off", "mistral-null", "llama"])
def test_a_left_out_window_is_what_transformers_builds(tmp_path, cfg):
    arch, _ = _arch_of(tmp_path, cfg)
    assert (arch.sliding_window, arch.sliding_layers) == _transformers_window(cfg)


def test_mistral_without_a_window_gets_mistralconfigs_and_says_so(tmp_path):
    cfg = _without_window(TINY["mistral"])
    arch, spec = _arch_of(tmp_path, cfg)
    window, layers = _transformers_window(cfg)
    assert window > 0 and (arch.sliding_window, arch.sliding_layers) == (window, layers)
    assert f"sliding_window {window}" in defaulted_note(spec)


def test_a_model_without_windowed_layers_asks_no_window():
    # a complete config of a model transformers never windows does not import transformers for a window
    assert "sliding_window" not in missing_fields(TINY["llama"])
    assert "sliding_window" not in missing_fields(_without_window(TINY["qwen2"], use_sliding_window=False))
