"""Fixtures over monitor_fakes (a stand-in pynvml, replay frames, a gpuwise subprocess runner)."""

from __future__ import annotations

import os

import pytest

from monitor_fakes import FakeGpu, FakeNvml, gpuwise, two_gpu_frames, write_frames


@pytest.fixture
def fake_nvml():
    return FakeNvml


@pytest.fixture
def fake_gpu():
    return FakeGpu


@pytest.fixture
def replay_env(tmp_path):
    """Environment for a gpuwise subprocess that samples the two-GPU replay instead of NVML."""
    frames = write_frames(tmp_path / "frames.json", two_gpu_frames())
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}", COLUMNS="100")
    return env


@pytest.fixture
def run_gpuwise():
    return gpuwise
