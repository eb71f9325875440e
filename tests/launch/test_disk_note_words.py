"""The disk note says a small model's weights in MB (ResNet-18's 47 MB was "0.0 GB of model weights"), and a
server's note does not speak of a dataset it never reads ("not the dataset")."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.launch import DiskNeed, plan_launch

RESNET18_WEIGHTS_BYTES = 46_800_000      # 11.7M float32 parameters


@pytest.mark.parametrize("model_bytes, said", [
    (RESNET18_WEIGHTS_BYTES, "47 MB of model weights"),
    (999_000_000, "999 MB of model weights"),
    (1_500_000_000, "1.5 GB of model weights"),
    (141_000_000_000, "141 GB of model weights"),
])
def test_model_weights_are_said_in_mb_below_a_gb(model_bytes, said):
    note = DiskNeed.of(model_bytes, 2 * model_bytes, training=True).note(machine="node")
    assert said in note and "0.0 GB" not in note


def test_a_small_checkpoint_is_said_in_mb():
    note = DiskNeed.of(RESNET18_WEIGHTS_BYTES, 2 * RESNET18_WEIGHTS_BYTES, training=True).note(machine="node")
    assert "4 checkpoints of 140 MB of weights" in note


def _notes(server: bool) -> tuple[str, ...]:
    cat = load_catalog(user_file=False)
    option = SimpleNamespace(gpu="h100-sxm", count=1, provider="aws", spot=False, replicas=1)
    command = "vllm serve meta-llama/Llama-3.1-8B" if server else "python train.py"
    return plan_launch(option, cat.gpu("h100-sxm"), command, disk=DiskNeed.of(16 * 10**9, 0, training=not server),
                       server=server).notes


def test_a_server_s_disk_note_says_nothing_of_a_dataset():
    (note,) = [n for n in _notes(server=True) if "of disk" in n]
    assert note.startswith("each replica needs") and "dataset" not in note


def test_a_training_job_s_disk_note_still_leaves_the_dataset_out_in_words():
    (note,) = [n for n in _notes(server=False) if "of disk" in n]
    assert note.startswith("each node needs") and "not the dataset" in note
