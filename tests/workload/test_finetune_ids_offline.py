"""Instruct / chat models resolve offline to their base model's shipped config (same architecture), with one
warning line; online (or from the user's Hub cache) their own config.json answers. Never the network here."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from gpuwise.workload import WorkloadError, hub, specs
from gpuwise.workload.llm_config import load_config
from gpuwise.workload.specs import CONFIG_DIR, finetune_base, resolve_model_spec

FINETUNES = {
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-hf",
    "google/gemma-2-9b-it": "google/gemma-2-9b",
    "Qwen/Qwen2-7B-Instruct": "Qwen/Qwen2-7B",
    "google/gemma-3-4b-it": "google/gemma-3-4b-pt",
    "baichuan-inc/Baichuan2-7B-Chat": "baichuan-inc/Baichuan2-7B-Base",
    "mistralai/Mistral-7B-Instruct-v0.3": "mistralai/Mistral-7B-v0.3",
    "Qwen/Qwen3-4B-Instruct-2507": "Qwen/Qwen3-4B",
}


def _shipped(repo: str) -> dict:
    return json.loads((CONFIG_DIR / (repo.replace("/", "--") + ".json")).read_text())


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    """Offline with an empty Hub cache; warnings not yet given in this process."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub._hub_config.cache_clear()
    specs._warn_finetune_base.cache_clear()
    yield tmp_path
    hub._hub_config.cache_clear()
    specs._warn_finetune_base.cache_clear()


@pytest.mark.parametrize("name, base", sorted(FINETUNES.items()))
def test_a_finetune_resolves_offline_to_its_base_models_config(no_hub, caplog, name, base):
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        spec = resolve_model_spec(f"hf:{name}")
    assert spec.name == f"hf:{name}" and spec.task == "causal-lm"
    assert spec.hf_config == _shipped(base)
    assert load_config(f"hf:{name}") == _shipped(base)      # the closed form reads the same file
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"using {base}'s shipped config for {name}: same architecture "
                        "(not in the Hub cache, and HF_HUB_OFFLINE is set)"]


def test_estimate_of_an_instruct_model_offline_prints_one_warning_and_runs(no_hub):
    env = {**os.environ, "HF_HUB_CACHE": str(no_hub / "empty"), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", "hf:Qwen/Qwen2.5-7B-Instruct",
                        "--finetune", "lora", "--seq-len", "1024", "--batch-size", "2", "--gpu", "a100-80gb-sxm4",
                        "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        "gpuwise: warning: using Qwen/Qwen2.5-7B's shipped config for Qwen/Qwen2.5-7B-Instruct: same architecture "
        "(not in the Hub cache, and HF_HUB_OFFLINE is set)"]
    assert json.loads(r.stdout)["memory"]["optimizer_bytes"] > 0


def test_an_unreachable_hub_falls_back_the_same_way(no_hub, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "probe", lambda repo_id, revision=None: None)
    assert resolve_model_spec("hf:google/gemma-2-9b-it").hf_config == _shipped("google/gemma-2-9b")


def test_a_typo_still_gets_the_closest_shipped_ids(no_hub):
    typo = r"unknown model hf:Qwen/Qwen2\.5-7B-Instrct .*did you mean: hf:Qwen/Qwen2\.5-7B"
    with pytest.raises(WorkloadError, match=typo):
        resolve_model_spec("hf:Qwen/Qwen2.5-7B-Instrct")
    with pytest.raises(WorkloadError, match="did you mean: hf:Qwen/Qwen2.5-7B"):
        resolve_model_spec("hf:Qwen/Qwen2.5-8B-Instruct")      # no such base shipped


def test_an_id_the_hub_says_does_not_exist_gets_no_base_config(no_hub, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "probe", lambda repo_id, revision=None: "missing")
    with pytest.raises(WorkloadError, match="not found on the Hub"):
        resolve_model_spec("hf:Qwen/Qwen2.5-7B-Instruct")


def test_the_finetunes_own_config_answers_when_the_users_hub_cache_has_it(no_hub, monkeypatch, caplog):
    from test_hub_models import hub_cache   # same folder: pytest puts it on sys.path

    own = {**_shipped("Qwen/Qwen2.5-7B"), "max_position_embeddings": 32768, "_name_or_path": "Qwen/Qwen2.5-7B-Instruct"}
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache(no_hub / "hub", "Qwen/Qwen2.5-7B-Instruct", own)))
    hub._hub_config.cache_clear()
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        spec = resolve_model_spec("hf:Qwen/Qwen2.5-7B-Instruct")
    assert spec.hf_config["max_position_embeddings"] == 32768 and not caplog.records


@pytest.mark.parametrize("name", ["someone/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instructor", "Qwen/Qwen2.5-7B",
                                  "Qwen/Qwen2.5-7B-Instruct-GGUF"])
def test_only_a_shipped_id_of_the_same_org_plus_a_finetune_suffix_has_a_base(name):
    assert finetune_base(name) is None
