"""A server whose model is a local checkpoint gets a SkyServe service that can start, or a one-line refusal.

Before: `recommend hf:mymodel/config.json … --emit skypilot` ran `vllm serve mymodel` on each replica with nothing
uploaded, and the header said vLLM downloads the model there: vLLM took `mymodel` for a Hub id and failed. Now a
folder with weights is uploaded (file_mounts) and served from /model; a folder with only a config is refused,
saying to serve the model by its Hub id."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwise.launch import skyserve
from gpuwise.workload.specs import CONFIG_DIR

L8_CONFIG = CONFIG_DIR / "meta-llama--Llama-3.1-8B.json"
SERVED = ["--mode", "infer", "--engine", "vllm", "--request-rate", "1", "--max-new-tokens", "64",
          "--provider", "aws", "--emit", "skypilot"]


def _recommend(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.fixture
def model_dir(tmp_path) -> Path:
    """A checkpoint folder ``mymodel`` holding Llama-3.1-8B's config.json, in the working directory ``tmp_path``."""
    folder = tmp_path / "mymodel"
    folder.mkdir()
    (folder / "config.json").write_text(L8_CONFIG.read_text())
    return folder


@pytest.mark.parametrize("spec", ["hf:mymodel/config.json", "hf:mymodel"])
def test_a_local_config_without_weights_is_refused_saying_to_serve_a_hub_id(tmp_path, model_dir, spec):
    done = _recommend(tmp_path, spec, *SERVED)
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert str(model_dir) in line and "no weights" in line and "hf:ORG/NAME" in line
    assert "vllm serve" not in line          # no line to run: no vLLM loads a folder without weights


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_a_local_checkpoint_with_weights_is_uploaded_and_served_from_model(sky, tmp_path, model_dir, weights):
    from sky.serve import serve_utils

    (model_dir / weights).write_bytes(b"")
    done = _recommend(tmp_path, "hf:mymodel/config.json", *SERVED, "--json")
    assert done.returncode == 0, done.stderr
    text = json.loads(done.stdout)["launch"]["text"]
    path = tmp_path / "task.yaml"
    path.write_text(text)
    task = sky.Task.from_yaml(str(path))
    serve_utils.validate_service_task(task, pool=False)
    assert task.file_mounts == {"/model": str(model_dir)}      # the absolute folder, whatever the working directory
    assert shlex.split(task.run)[:3] == ["vllm", "serve", "/model"]
    assert "vLLM downloads the model" not in text and f"uploads {model_dir} to /model" in text
    # nothing is downloaded, so the readiness delay and its note count the load alone
    assert "download at an assumed" not in text and "uploaded before setup" in text


def test_an_uploaded_checkpoint_waits_for_its_load_alone():
    large_bytes = 400 * 10**9
    uploaded = skyserve.readiness_initial_delay_s(large_bytes, downloaded=False)
    assert uploaded == max(skyserve.SKYSERVE_DEFAULT_INITIAL_DELAY_S,
                           math.ceil(large_bytes / skyserve.DISK_READ_BYTES_PER_S))
    assert uploaded < skyserve.readiness_initial_delay_s(large_bytes)


def test_a_hub_id_is_still_downloaded_with_the_token(tmp_path):
    done = _recommend(tmp_path, "hf:meta-llama/Llama-3.1-8B", *SERVED)
    assert done.returncode == 0, done.stderr
    assert "file_mounts" not in done.stdout and "HF_TOKEN: ''" in done.stdout
    assert "vllm serve meta-llama/Llama-3.1-8B " in done.stdout
