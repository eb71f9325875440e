"""A SkyServe replica of a served plan starts as the plan assumes it does: its readiness probe waits for the
checkpoint's download and load (a 70B's 141 GB outlast SkyServe's default 1200 s, after which a replica still
loading was torn down as failed), its disk note speaks of replicas (it said "each node"), and setup installs the
vLLM series whose defaults the plan models (it installed whatever vLLM was current)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from packaging.requirements import Requirement

from gpuwise.catalog import load_catalog
from gpuwise.launch import DiskNeed, plan_launch, skyserve
from gpuwise.memory.llm import vllm_batch_defaults
from gpuwise.workload.decoder import load_arch

REPO = Path(__file__).resolve().parents[2]
L8, L70 = "hf:meta-llama/Llama-3.1-8B", "hf:meta-llama/Llama-3.1-70B"
SERVED = ["--mode", "infer", "--engine", "vllm", "--max-new-tokens", "256", "--seq-len", "1024"]


def _served_launch(model: str, rate: str, provider: str) -> dict:
    """``--json``'s ``launch`` of ``recommend … --emit skypilot`` for a vLLM server."""
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", model, *SERVED, "--request-rate",
                           rate, "--provider", provider, "--emit", "skypilot", "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["launch"]


@pytest.fixture(scope="module")
def served_70b() -> dict:
    return _served_launch(L70, "20", "aws")


def _service(sky, tmp_path, launch: dict):
    """The emitted service as SkyPilot parses and checks it before ``sky serve up`` starts anything."""
    from sky.serve import serve_utils

    path = tmp_path / "task.yaml"
    path.write_text(launch["text"])
    task = sky.Task.from_yaml(str(path))
    serve_utils.validate_service_task(task, pool=False)
    return task


def test_a_70b_replica_is_given_the_time_to_download_and_load_its_checkpoint(sky, tmp_path, served_70b):
    from sky.serve import constants

    task = _service(sky, tmp_path, served_70b)
    checkpoint_bytes = load_arch(L70).param_counts().total * 2          # its config says torch_dtype bfloat16
    start_s = (checkpoint_bytes / skyserve.DOWNLOAD_BYTES_PER_S + checkpoint_bytes / skyserve.DISK_READ_BYTES_PER_S)
    assert task.service.readiness_path == "/health"
    assert task.service.initial_delay_seconds >= start_s > constants.DEFAULT_INITIAL_DELAY_SECONDS
    assert f"has not answered {task.service.initial_delay_seconds} s after its setup" in served_70b["text"]


def test_a_small_model_s_replica_keeps_skyserve_s_own_default_delay(sky, tmp_path):
    from sky.serve import constants

    task = _service(sky, tmp_path, _served_launch(L8, "5", "runpod"))
    assert skyserve.SKYSERVE_DEFAULT_INITIAL_DELAY_S == constants.DEFAULT_INITIAL_DELAY_SECONDS
    assert task.service.initial_delay_seconds == constants.DEFAULT_INITIAL_DELAY_SECONDS


def test_the_delay_grows_with_the_model_past_skyserve_s_default():
    floor_s = skyserve.SKYSERVE_DEFAULT_INITIAL_DELAY_S
    assert skyserve.readiness_initial_delay_s(0) == floor_s
    large_bytes = 10**12
    one, two = skyserve.readiness_initial_delay_s(large_bytes), skyserve.readiness_initial_delay_s(2 * large_bytes)
    assert floor_s < one and abs(two - 2 * one) <= 1


def test_a_server_s_disk_note_counts_each_replica_and_a_training_job_s_each_node(served_70b):
    (note,) = [n for n in served_70b["notes"] if "of disk" in n]
    assert note.startswith("each replica needs") and "node" not in note
    assert f"# note: {note}" in served_70b["text"]
    cat = load_catalog(user_file=False)
    trained = plan_launch(SimpleNamespace(count=1, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py",
                          disk=DiskNeed.of(16 * 10**9, 32 * 10**9, training=True))
    (note,) = [n for n in trained.notes if "of disk" in n]
    assert note.startswith("each node needs")


def test_setup_installs_the_vllm_series_the_serving_defaults_are_modelled_on(served_70b):
    cited = re.search(r"vLLM (\d+)\.(\d+)", vllm_batch_defaults.__doc__)       # the release the plan models
    major, minor = int(cited[1]), int(cited[2])
    pip, install, requirement = shlex.split(yaml.safe_load(served_70b["text"])["setup"])
    required = Requirement(requirement)
    assert (pip, install, required.name) == ("pip", "install", "vllm")
    assert required.specifier.contains(f"{major}.{minor}.0") and required.specifier.contains(f"{major}.{minor}.3")
    assert not required.specifier.contains(f"{major}.{minor + 1}.0")
    assert not required.specifier.contains(f"{major}.{minor - 1}.0")
