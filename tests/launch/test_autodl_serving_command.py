"""A server on AutoDL, which SkyPilot does not know, is refused with a command that runs there as written: the vLLM
series the plan models installed (``VLLM_VERSION``), and ``vllm serve`` listening on every interface at port 6006,
where AutoDL's custom service reaches an instance. Before, the line named only ``vllm serve … --max-model-len 1280``:
whatever vLLM pip gave, on port 8000, which AutoDL does not expose."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement

from gpuwise.launch import LaunchError, serve_best
from gpuwise.launch.server import VLLM_PORT
from gpuwise.workload import Workload
from gpuwise.workload.model import VLLM_VERSION

REPO = Path(__file__).resolve().parents[2]
L8 = "hf:meta-llama/Llama-3.1-8B"
AUTODL_PORT = "6006"


def _refusal(cat, provider: str, emit: str) -> str:
    workload = Workload(L8, mode="infer", engine="vllm", seq_len=1024, max_new_tokens=256,
                        request_rate_per_s=5.0).with_default_precision()
    best = SimpleNamespace(count=1, gpu="rtx-4090", provider=provider, replicas=1, spot=False)
    rec = SimpleNamespace(workload=workload, best=best, options=[best], nothing_reason=None, fallback_precision={})
    with pytest.raises(LaunchError) as refused:
        serve_best(rec, cat, emit)
    return str(refused.value)


def _quoted(line: str) -> list[list[str]]:
    """The words of each command the line quotes in backquotes."""
    return [shlex.split(cmd) for cmd in re.findall(r"`([^`]+)`", line)]


def _port(words: list[str]) -> str | None:
    return words[words.index("--port") + 1] if "--port" in words else None


@pytest.mark.parametrize("emit", ["skypilot", "torchrun"])
def test_autodl_s_line_listens_on_the_port_autodl_exposes_and_says_so(cat, emit):
    line = _refusal(cat, "autodl", emit)
    serve = _quoted(line)[0]
    assert serve[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert "--max-model-len" in serve
    assert serve[serve.index("--host") + 1] == "0.0.0.0" and _port(serve) == AUTODL_PORT
    assert "AutoDL" in line and "custom service" in line


@pytest.mark.parametrize("provider", ["autodl", "aws"])
def test_the_refusal_names_the_pinned_vllm_to_install(cat, provider):
    (pip,) = [words for words in _quoted(_refusal(cat, provider, "torchrun")) if words[:2] == ["pip", "install"]]
    required = Requirement(pip[2])
    assert required.name == "vllm"
    major, minor = map(int, VLLM_VERSION.split("."))
    assert required.specifier.contains(f"{major}.{minor}.0") and required.specifier.contains(f"{major}.{minor}.3")
    assert not required.specifier.contains(f"{major}.{minor + 1}.0")


def test_a_cloud_without_a_port_convention_keeps_vllm_s_own(cat):
    serve = _quoted(_refusal(cat, "aws", "torchrun"))[0]
    assert _port(serve) in (None, str(VLLM_PORT))


def test_the_cli_refuses_autodl_s_service_in_one_line_with_the_command():
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", L8, "--mode", "infer", "--engine",
                           "vllm", "--request-rate", "5", "--max-new-tokens", "256", "--seq-len", "1024",
                           "--provider", "autodl", "--emit", "skypilot"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    words = _quoted(line)
    assert _port(words[0]) == AUTODL_PORT
    assert any(w[:2] == ["pip", "install"] and Requirement(w[2]).name == "vllm" for w in words)
