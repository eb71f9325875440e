"""A SkyServe replica's readiness note says whose disk its load time assumes: the speed is SkyPilot's default disk on
AWS (gp3), which gpuwise knows; on another cloud it is an assumption for that provider's disk. Before, a service on
RunPod said its load was timed on "SkyPilot's default disk on AWS", as if the replica ran there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuwise.launch import DiskNeed, plan_launch
from gpuwise.launch.skyserve import DISK_READ_BYTES_PER_S, render_skyserve

LINE = "vllm serve meta-llama/Llama-3.1-8B --max-model-len 1280 --host 0.0.0.0 --port 8000"


def _start_note(cat, provider: str, gpu: str) -> str:
    option = SimpleNamespace(count=1, provider=provider, spot=False, replicas=1)
    plan = plan_launch(option, cat.gpu(gpu), LINE, disk=DiskNeed.of(16 * 10**9, 0, training=False), server=True)
    (note,) = [line for line in render_skyserve(plan).splitlines()
               if line.startswith("# note:") and "initial_delay_seconds:" in line]
    return note


@pytest.mark.parametrize("provider, gpu", [("runpod", "rtx-4090"), ("gcp", "a100-40gb-sxm4")])
def test_another_cloud_s_load_speed_is_said_to_be_assumed_for_its_own_disk(cat, provider, gpu):
    note = _start_note(cat, provider, gpu)
    assert f"an assumed {DISK_READ_BYTES_PER_S / 2**20:g} MiB/s for {provider}'s disk" in note


def test_aws_s_load_speed_is_skypilot_s_default_disk_there(cat):
    note = _start_note(cat, "aws", "h100-sxm")
    assert f"{DISK_READ_BYTES_PER_S / 2**20:g} MiB/s, SkyPilot's default disk on AWS" in note
    assert "assumed 218" not in note
