"""The disk note speaks of the machine the launch runs on. A SkyPilot task's one disk holds the system too, and the
task asks for ``disk_size``; a machine rented by hand from a provider SkyPilot does not know (AutoDL) comes with its
own disks: a 30 GB system disk and a 50 GB data disk at /root/autodl-tmp (expandable for a fee). Before, AutoDL's
note counted "~100 GB for the system and packages" and said "a SkyPilot task asks for disk_size 256 GB"."""

from __future__ import annotations

from types import SimpleNamespace

from gpuwise.launch import DiskNeed, plan_launch
from gpuwise.launch.disk import CHECKPOINTS_ON_DISK, GB

SMALL = DiskNeed.of(102 * 10**6, 205 * 10**6, training=True)       # ResNet-50 and AdamW
LARGE = DiskNeed.of(16 * GB, 32 * GB, training=True)                 # 8B full fine-tune: 16 + 4 x 48 GB
AUTODL_DATA_DISK_BYTES = 50 * GB     # what an AutoDL instance's data disk holds before it is expanded


def _job_bytes(need: DiskNeed) -> int:
    """The job's own files: the model and the checkpoints on disk at once."""
    return need.model_bytes + CHECKPOINTS_ON_DISK * need.checkpoint_bytes


def _disk_note(cat, provider: str, gpu: str, need: DiskNeed) -> str:
    plan = plan_launch(SimpleNamespace(count=1, provider=provider, spot=False), cat.gpu(gpu), "python train.py",
                       disk=need)
    (note,) = [n for n in plan.notes if "of disk" in n]
    return note


def test_autodl_s_note_puts_the_job_s_files_on_its_data_disk_and_asks_for_no_skypilot_disk(cat):
    note = _disk_note(cat, "autodl", "rtx-4090", SMALL)
    assert "/root/autodl-tmp" in note and "data disk" in note
    assert "disk_size" not in note and "SkyPilot" not in note
    assert "for the system and packages" not in note


def test_autodl_s_note_says_the_job_s_own_bytes_not_the_system_s(cat):
    note = _disk_note(cat, "autodl", "rtx-4090", LARGE)
    assert note.startswith(f"each node needs ~{_job_bytes(LARGE) / GB:,.0f} GB of disk for the job's files")


def test_a_job_larger_than_autodl_s_data_disk_is_told_to_expand_it(cat):
    assert _job_bytes(LARGE) > AUTODL_DATA_DISK_BYTES > _job_bytes(SMALL)
    assert "expand the data disk" in _disk_note(cat, "autodl", "rtx-4090", LARGE)
    assert "expand" not in _disk_note(cat, "autodl", "rtx-4090", SMALL)


def test_a_provider_skypilot_does_not_know_and_gpuwise_has_no_data_disk_for_is_told_neutrally():
    note = LARGE.note(machine="node", rented_at="aliyun")
    assert "disk_size" not in note and "autodl" not in note
    assert "aliyun machine with that much disk free" in note


def test_a_skypilot_provider_keeps_the_task_s_disk_size(cat):
    note = _disk_note(cat, "aws", "h100-sxm", LARGE)
    assert f"a SkyPilot task asks for disk_size {LARGE.disk_size_gb} GB" in note
    assert "autodl-tmp" not in note
