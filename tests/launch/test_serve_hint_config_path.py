"""The `vllm serve` line a server's --emit refusal names, for a model given as a local config: vLLM loads a model
directory or a Hub id, so the line names the directory holding the config.json, not the file.

A new user's trial: `gpuwise recommend hf:awq/config.json --mode infer --request-rate 4 --emit torchrun ...` said
to run `vllm serve awq/config.json --max-model-len 2304`, which vLLM cannot load.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.launch import server_emit_refusal
from gpuwise.workload import Workload
from gpuwise.workload.checkpoint import stored_weights
from gpuwise.workload.specs import CONFIG_DIR

QWEN = CONFIG_DIR / "Qwen--Qwen2.5-0.5B.json"
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}


def _served_words(model: str) -> list[str]:
    """The words of the `vllm serve …` line the refusal names for ``model`` served by vLLM on one GPU."""
    workload = Workload(model, mode="infer", engine="vllm", seq_len=1024, max_new_tokens=256).with_default_precision()
    best = SimpleNamespace(count=1, gpu="rtx-4090", provider="autodl", replicas=1)
    line = server_emit_refusal(SimpleNamespace(workload=workload, best=best, fallback_precision={}), "torchrun")
    return shlex.split(line.split("`")[1])


@pytest.fixture
def awq_dir(tmp_path, monkeypatch) -> Path:
    """An AWQ checkpoint's folder with only its config.json, the working directory its parent (as in the trial)."""
    folder = tmp_path / "awq"
    folder.mkdir()
    cfg = {**json.loads(QWEN.read_text()), "quantization_config": AWQ, "torch_dtype": "float16"}
    (folder / "config.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(tmp_path)
    stored_weights.cache_clear()
    yield folder
    stored_weights.cache_clear()


def test_a_config_path_is_served_as_the_directory_that_holds_it(awq_dir):
    words = _served_words("hf:awq/config.json")
    assert words[:3] == ["vllm", "serve", "awq"]
    assert (Path(words[2]) / "config.json").is_file()          # what vLLM reads from the model directory
    assert not any(w.endswith(".json") for w in words)


def test_an_absolute_config_path_with_a_space_is_served_as_its_directory_quoted(tmp_path, awq_dir):
    spaced = tmp_path / "my models" / "awq"
    spaced.parent.mkdir()
    awq_dir.rename(spaced)
    words = _served_words(f"hf:{spaced / 'config.json'}")
    assert words[:3] == ["vllm", "serve", str(spaced)]


def test_a_hub_id_is_served_as_given():
    assert _served_words("hf:meta-llama/Llama-3.1-8B")[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
