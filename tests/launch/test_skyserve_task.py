"""`--emit skypilot` for a server gives a SkyServe service that SkyPilot's own parsers accept: vLLM's readiness
probe, the recommendation's replicas, one replica's machine with the port vLLM listens on and the disk for its
model, and the same `vllm serve` line the torchrun refusal names. Before, every server's --emit was refused."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.launch import LaunchError, check_emit, serve_best
from gpuwise.launch.server import VLLM_PORT, VLLM_READINESS_PATH
from gpuwise.workload import Workload

REPO = Path(__file__).resolve().parents[2]
L8 = "hf:meta-llama/Llama-3.1-8B"
SERVED = ["--mode", "infer", "--engine", "vllm", "--max-new-tokens", "256", "--seq-len", "1024"]


def _recommend(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)


def _served_words(text: str) -> list[str]:
    """The words of the first `vllm serve …` line quoted in backquotes."""
    return shlex.split(text.split("`")[1])


@pytest.mark.parametrize("model, rate, provider", [
    (L8, "5", "runpod"),                                   # the trial's: one replica of one GPU
    ("hf:meta-llama/Llama-3.1-70B", "20", "aws"),          # several replicas, each tensor parallel
])
def test_a_server_s_emit_skypilot_is_a_skyserve_service_skypilot_accepts(sky, tmp_path, model, rate, provider):
    from sky.serve import serve_utils

    args = [model, *SERVED, "--request-rate", rate, "--provider", provider]
    done = _recommend(*args, "--emit", "skypilot", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    best, launch = answer["best"], answer["launch"]
    path = tmp_path / "task.yaml"
    path.write_text(launch["text"])
    task = sky.Task.from_yaml(str(path))
    serve_utils.validate_service_task(task, pool=False)     # what `sky serve up` checks before it starts anything
    assert task.service.readiness_path == VLLM_READINESS_PATH
    assert task.service.min_replicas == best["replicas"] == launch["replicas"]
    (resources,) = task.resources
    assert resources.ports == [str(VLLM_PORT)]
    assert list(resources.accelerators.values()) == [best["count"]]
    assert resources.disk_size == launch["disk_size_gb"]
    # the run line is the one the torchrun refusal names, listening where the load balancer forwards
    refused = _recommend(*args, "--emit", "torchrun")
    assert refused.returncode == 2
    named = _served_words(refused.stderr)
    run = shlex.split(task.run)
    assert run == [*named, "--host", "0.0.0.0", "--port", str(VLLM_PORT)]
    assert ("--tensor-parallel-size" in run) is (best["count"] > 1)
    assert launch["text"].splitlines()[0].endswith("sky serve up <this file>")


def test_emit_torchrun_for_a_server_names_the_line_and_emit_skypilot():
    done = _recommend(L8, *SERVED, "--request-rate", "5", "--provider", "runpod", "--emit", "torchrun")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "`vllm serve meta-llama/Llama-3.1-8B" in line and "--emit skypilot" in line


def test_a_provider_skypilot_does_not_know_is_refused_naming_the_line_to_run_there():
    done = _recommend(L8, *SERVED, "--request-rate", "5", "--provider", "autodl", "--emit", "skypilot")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "SkyPilot does not know the provider 'autodl'" in line
    assert _served_words(line)[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]


def _rec(engine: str, best=SimpleNamespace(count=1, gpu="h100-sxm", provider="aws", replicas=2, spot=False)):
    workload = Workload(L8, mode="infer", engine=engine, seq_len=1024, max_new_tokens=256,
                        request_rate_per_s=2.0).with_default_precision()
    return SimpleNamespace(workload=workload, best=best, options=[], nothing_reason="no offer from aws",
                           fallback_precision={})


def test_hf_generate_at_a_rate_has_no_server_to_start_and_says_to_serve_with_vllm(cat):
    with pytest.raises(LaunchError, match="--engine vllm") as refused:
        serve_best(_rec("hf"), cat, "skypilot")
    assert "\n" not in str(refused.value)


def test_nothing_to_serve_says_why(cat):
    with pytest.raises(LaunchError, match="nothing to launch: no offer from aws"):
        serve_best(_rec("vllm", best=None), cat, "skypilot")


def test_a_command_for_a_server_is_refused_not_ignored():
    with pytest.raises(LaunchError, match="drop --command"):
        check_emit("skypilot", "python serve.py", server=True)
    check_emit("skypilot", None, server=True)
