"""Any Hub model id resolves through huggingface_hub's cache (config.json only); never the network here.

Each test builds a Hub cache in tmp_path with the hub's layout (models--ORG--NAME/snapshots/REV/
config.json and refs/main) and points HF_HUB_CACHE at it, with HF_HUB_OFFLINE=1 (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuwise.workload import WorkloadError, hub
from gpuwise.workload.llm_config import load_config
from gpuwise.workload.specs import CONFIG_DIR, resolve_model_spec

DISTILL = "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"
# DeepSeek-R1-Distill-Qwen-7B is a Qwen2 7B with a longer context and its own rope base.
DISTILL_CONFIG = {**json.loads((CONFIG_DIR / "Qwen--Qwen2.5-7B.json").read_text()),
                  "max_position_embeddings": 131072, "rope_theta": 10000, "sliding_window": 4096,
                  "_name_or_path": DISTILL}


def hub_cache(root, repo_id: str, config: dict, revision: str = "916b56a44061fd5cd7d6a8fb632557ed4f724f60"):
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return root


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = hub_cache(tmp_path / "hub", DISTILL, DISTILL_CONFIG)
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub._hub_config.cache_clear()
    yield root
    hub._hub_config.cache_clear()


def test_a_hub_model_without_a_shipped_config_resolves_from_the_users_hub_cache(cache):
    spec = resolve_model_spec(f"hf:{DISTILL}")
    assert spec.name == f"hf:{DISTILL}" and spec.task == "causal-lm"
    assert spec.hf_config["max_position_embeddings"] == 131072
    assert load_config(f"hf:{DISTILL}")["rope_theta"] == 10000


def test_estimate_of_a_hub_model_runs_offline_from_the_cache(cache):
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", f"hf:{DISTILL}", "--precision", "bf16",
                        "--seq-len", "512", "--batch-size", "1", "--finetune", "lora", "--json"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    weights = json.loads(r.stdout)["memory"]["weights_bytes"]
    assert 7.0e9 * 2 < weights < 8.0e9 * 2  # 7.6 B parameters in bf16


def test_offline_and_not_cached_is_refused_naming_the_model_and_why(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    hub._hub_config.cache_clear()
    with pytest.raises(WorkloadError, match="DeepSeek-R1-Distill-Qwen-7B.*HF_HUB_OFFLINE"):
        resolve_model_spec(f"hf:{DISTILL}")


def test_a_gated_model_says_how_to_log_in(tmp_path, monkeypatch):
    # The Hub's answer is faked (no network here); everything after it is the real path.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "probe", lambda repo_id, revision=None: "gated")
    hub._hub_config.cache_clear()
    with pytest.raises(WorkloadError) as info:
        resolve_model_spec("hf:meta-llama/Llama-Guard-3-8B")
    assert "gated" in str(info.value) and "hf auth login" in str(info.value) and "HF_TOKEN" in str(info.value)
    hub._hub_config.cache_clear()


def test_an_unreachable_hub_falls_back_to_the_shipped_configs(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "probe", lambda repo_id, revision=None: None)
    hub._hub_config.cache_clear()
    # A fine-tune shares its base model's architecture: the shipped base config answers.
    assert load_config("hf:Qwen/Qwen2.5-7B-Instruct")["hidden_size"] == 3584
    hub._hub_config.cache_clear()


def test_a_shipped_config_is_used_without_looking_at_the_hub(monkeypatch):
    monkeypatch.setattr(hub, "hub_config_path", lambda *a, **k: pytest.fail("asked the Hub for a shipped model"))
    assert resolve_model_spec("hf:Qwen/Qwen2.5-7B").hf_config["hidden_size"] == 3584


def test_an_unreachable_hub_is_named_as_the_reason_a_model_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub, "probe", lambda repo_id, revision=None: None)
    hub._hub_config.cache_clear()
    with pytest.raises(WorkloadError, match="the Hub could not be reached"):
        resolve_model_spec(f"hf:{DISTILL}")
    hub._hub_config.cache_clear()
