"""A SkyPilot task asks for the disk its job needs (``resources.disk_size``): the model, the guard's checkpoints.
SkyPilot's default (256 GB) holds one checkpoint of a 70B full fine-tune (0.85 TB) not at all."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from gpuwise.guard.checkpoint import CheckpointStore
from gpuwise.launch import plan_launch, render
from gpuwise.launch.disk import CHECKPOINTS_ON_DISK, GB, SKYPILOT_DEFAULT_DISK_GB, SYSTEM_BYTES, DiskNeed

REPO = Path(__file__).resolve().parents[2]


def _emit(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", *args, "--json"], capture_output=True,
                         text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["launch"]


def test_checkpoints_on_disk_are_the_guards_default_keep_and_the_one_being_written():
    keep = inspect.signature(CheckpointStore).parameters["keep"].default
    assert CHECKPOINTS_ON_DISK == keep + 1


def test_a_70b_full_fine_tune_asks_for_its_checkpoints_far_above_skypilots_default(sky, tmp_path):
    launch = _emit("hf:meta-llama/Llama-3.1-70B", "--seq-len", "4096", "--steps", "1000", "--provider", "aws",
                   "--gpus", "h100-sxm", "--max-gpus", "32", "--sharding", "fsdp", "--precision", "amp-bf16",
                   "--grad-checkpointing", "--emit", "skypilot", "--command", "python train.py --checkpoint-dir /ckpt")
    params = 70.6e9
    # a checkpoint: float32 weights and AdamW's two float32 states, 12 bytes a parameter; 4 of them on disk
    least_gb = (CHECKPOINTS_ON_DISK * 12 * params + SYSTEM_BYTES) / GB
    assert least_gb <= launch["disk_size_gb"] <= 1.1 * least_gb + 4 * params / GB
    path = tmp_path / "task.yaml"
    path.write_text(launch["text"])
    (resources,) = sky.Task.from_yaml(str(path)).resources
    assert resources.disk_size == launch["disk_size_gb"]            # SkyPilot's own parser reads it
    assert any(f"disk_size {launch['disk_size_gb']} GB" in note for note in launch["notes"])


def test_a_small_job_asks_no_skypilot_disk_off_skypilot_and_torchrun_says_the_need():
    launch = _emit("hf:meta-llama/Llama-3.1-8B", "--seq-len", "2048", "--steps", "500", "--finetune", "qlora",
                   "--grad-checkpointing", "--provider", "autodl", "--emit", "torchrun", "--command", "python train.py")
    assert launch["disk_size_gb"] is None     # AutoDL: no SkyPilot task; the job's own need is job_disk_gb
    assert 0 < launch["job_disk_gb"] < SKYPILOT_DEFAULT_DISK_GB
    (note,) = [n for n in launch["notes"] if "of disk" in n]
    assert note in launch["text"]


def test_serving_counts_no_checkpoints():
    need = DiskNeed.of(140 * GB, 280 * GB, training=False)
    assert need.checkpoint_bytes == 0
    assert need.disk_size_gb == SKYPILOT_DEFAULT_DISK_GB
    assert "checkpoints" not in need.note(machine="replica")


def test_disk_size_is_rounded_up_not_down():
    need = DiskNeed.of(100 * GB, 101 * GB, training=True)      # 100 + 100 + 4 x 201 = 1004 GB
    assert need.disk_size_gb == 1050


def test_a_plan_without_a_known_disk_leaves_skypilots_default(cat):
    plan = plan_launch(SimpleNamespace(count=1, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py")
    assert "disk_size" not in render(plan, "skypilot")
    plan = plan_launch(SimpleNamespace(count=1, provider="aws", spot=False), cat.gpu("h100-sxm"), "python train.py",
                       disk=DiskNeed.of(300 * GB, 600 * GB, training=True))   # 100 + 300 + 4 x 900 GB
    assert "  disk_size: 4000\n" in render(plan, "skypilot")
