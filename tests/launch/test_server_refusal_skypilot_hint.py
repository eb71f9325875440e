"""The torchrun refusal for a server names `--emit skypilot` only where it gives a SkyServe service.

Before: for a provider SkyPilot does not know (AutoDL) the refusal still said "--emit skypilot gives it as a
SkyServe service", and following it gave a second refusal ("SkyPilot does not know the provider 'autodl'")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.launch import server_emit_refusal
from gpuwise.workload import Workload
from gpuwise.workload.specs import CONFIG_DIR

REPO = Path(__file__).resolve().parents[2]
L8 = "hf:meta-llama/Llama-3.1-8B"
HINT = "--emit skypilot"


def _refusal(model: str, provider: str) -> str:
    workload = Workload(model, mode="infer", engine="vllm", seq_len=1024, max_new_tokens=256,
                        request_rate_per_s=5.0).with_default_precision()
    best = SimpleNamespace(count=1, gpu="rtx-4090", provider=provider, replicas=1)
    return server_emit_refusal(SimpleNamespace(workload=workload, best=best, fallback_precision={}), "torchrun")


def test_autodl_s_refusal_names_the_line_and_not_emit_skypilot():
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", L8, "--mode", "infer", "--engine",
                           "vllm", "--request-rate", "5", "--max-new-tokens", "256", "--seq-len", "1024",
                           "--provider", "autodl", "--emit", "torchrun"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "`vllm serve meta-llama/Llama-3.1-8B" in line and "from autodl" in line
    assert HINT not in line


@pytest.mark.parametrize("provider, hinted", [("runpod", True), ("aws", True), ("autodl", False)])
def test_the_hint_follows_whether_skypilot_knows_the_provider(provider, hinted):
    assert (HINT in _refusal(L8, provider)) is hinted


def test_a_local_config_without_weights_gets_no_hint_either(tmp_path, monkeypatch):
    (tmp_path / "mymodel").mkdir()
    (tmp_path / "mymodel" / "config.json").write_text((CONFIG_DIR / "meta-llama--Llama-3.1-8B.json").read_text())
    monkeypatch.chdir(tmp_path)
    line = _refusal("hf:mymodel/config.json", "aws")
    assert "`vllm serve mymodel" in line and HINT not in line
