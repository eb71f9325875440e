"""Off SkyPilot (AutoDL: ``skypilot_cloud`` is None) no task asks for a ``disk_size``, so ``--json``'s
``launch.disk_size_gb`` is null there and the job's own files (model and checkpoints, beside the system) are
``launch.job_disk_gb``; before, AutoDL's ``disk_size_gb`` said 256 (SkyPilot's default) while its note spoke of the
data disk. And the note names what the job writes: an inference job writes no checkpoints, and was told to keep
"the checkpoint directory" on the data disk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from gpuwise.launch import DiskNeed, plan_launch
from gpuwise.launch.disk import GB

REPO = Path(__file__).resolve().parents[2]
TRAINING = DiskNeed.of(16 * GB, 32 * GB, training=True)     # 8B full fine-tune: 16 GB + 4 checkpoints of 48 GB
SERVING = DiskNeed.of(16 * GB, 0, training=False)           # 8B inference: the download only


def _launch_json(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", *args, "--json"], capture_output=True,
                         text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["launch"]


def _said_job_gb(launch: dict) -> float:
    """The GB the disk note says the job's files need (its "~1.3 GB of disk for the job's files")."""
    (note,) = [n for n in launch["notes"] if "of disk" in n]
    return float(note.split("needs ~")[1].split(" GB")[0].replace(",", ""))


def _plan(cat, provider: str, gpu: str, need: DiskNeed):
    return plan_launch(SimpleNamespace(count=1, provider=provider, spot=False), cat.gpu(gpu), "python train.py",
                       disk=need)


def _disk_note(plan) -> str:
    (note,) = [n for n in plan.notes if "of disk" in n]
    return note


def test_autodl_json_has_no_skypilot_disk_size_and_says_the_job_s_own_disk():
    launch = _launch_json("torchvision:resnet50", "--provider", "autodl", "--steps", "1000", "--emit", "torchrun",
                          "--command", "python train.py")
    assert launch["disk_size_gb"] is None
    # the note's "~1.3 GB of disk for the job's files" (rounded for prose), in whole GB rounded up
    assert launch["job_disk_gb"] - 1 <= _said_job_gb(launch) <= launch["job_disk_gb"]


def test_a_skypilot_provider_keeps_its_task_disk_size_and_gives_the_job_s_share_too(cat):
    plan = _plan(cat, "aws", "h100-sxm", TRAINING)
    assert plan.disk_size_gb == TRAINING.disk_size_gb
    assert TRAINING.job_disk_gb == 16 + 4 * 48 < plan.disk_size_gb


def test_autodl_plan_asks_for_no_disk_size(cat):
    assert _plan(cat, "autodl", "rtx-4090", TRAINING).disk_size_gb is None


def test_job_disk_rounds_up_to_whole_gb():
    assert DiskNeed.of(int(1.2 * GB), 0, training=False).job_disk_gb == 2


def test_expanding_autodl_s_data_disk_names_the_job_s_disk(cat):
    note = _disk_note(_plan(cat, "autodl", "rtx-4090", TRAINING))
    assert f"expand the data disk (for a fee) to at least {TRAINING.job_disk_gb} GB" in note


def test_an_inference_job_on_autodl_is_told_of_its_download_cache_not_a_checkpoint_directory(cat):
    note = _disk_note(_plan(cat, "autodl", "rtx-4090", SERVING))
    assert "checkpoint directory" not in note
    assert "keep the model's download cache (HF_HOME, TORCH_HOME) on the data disk" in note


def test_an_inference_job_elsewhere_off_skypilot_is_told_of_its_download_cache_only():
    note = SERVING.note(machine="node", rented_at="aliyun")
    assert "checkpoint directory" not in note
    assert "keep the model's download cache (HF_HOME, TORCH_HOME) there" in note


def test_a_training_job_on_autodl_keeps_its_checkpoint_directory_on_the_data_disk(cat):
    note = _disk_note(_plan(cat, "autodl", "rtx-4090", TRAINING))
    assert "keep the checkpoint directory and the model's download cache (HF_HOME, TORCH_HOME) on the data disk" in note


def test_autodl_hf_inference_json_note_speaks_of_the_download_cache_only():
    launch = _launch_json("hf:meta-llama/Llama-3.1-8B", "--mode", "infer", "--engine", "hf", "--max-new-tokens",
                          "256", "--seq-len", "1024", "--provider", "autodl", "--emit", "torchrun", "--command",
                          "python serve.py")
    (note,) = [n for n in launch["notes"] if "of disk" in n]
    assert "checkpoint" not in note and "/root/autodl-tmp" in note
    assert launch["disk_size_gb"] is None
    assert launch["job_disk_gb"] - 1 <= _said_job_gb(launch) <= launch["job_disk_gb"]
