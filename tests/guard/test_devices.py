"""Freest-GPU selection (NVML behind an interface; a fake here, as this machine has no GPU)."""

from __future__ import annotations

import pytest
import torch

from gpuwise.guard import GuardError
from gpuwise.guard.devices import (FakeGpuSource, GpuState, NvmlGpuSource, cap_memory, rank_freest,
                                   release_cached_memory, select_gpus)

GIB = 2**30


def _box() -> FakeGpuSource:
    return FakeGpuSource([
        GpuState(0, "GPU-aaa", "NVIDIA GeForce RTX 4090", 2 * GIB, 24 * GIB, 97.0),   # a neighbour's job
        GpuState(1, "GPU-bbb", "NVIDIA GeForce RTX 4090", 23 * GIB, 24 * GIB, 40.0),
        GpuState(2, "GPU-ccc", "NVIDIA GeForce RTX 4090", 23 * GIB, 24 * GIB, 0.0),
        GpuState(3, "GPU-ddd", "NVIDIA GeForce RTX 4090", 12 * GIB, 24 * GIB, 0.0),
    ])


def test_freest_gpus_first_by_free_memory_then_utilisation():
    assert [g.index for g in rank_freest(_box().gpus())] == [2, 1, 3, 0]
    assert [g.index for g in rank_freest(_box().gpus(), min_free_bytes=20 * GIB)] == [2, 1]


def test_select_sets_visible_devices_by_uuid_in_pci_order():
    env: dict[str, str] = {}
    chosen = select_gpus(2, source=_box(), env=env)
    assert [g.index for g in chosen] == [2, 1]
    assert env == {"CUDA_VISIBLE_DEVICES": "GPU-ccc,GPU-bbb", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_select_refuses_when_not_enough_gpus_have_the_memory():
    with pytest.raises(GuardError, match="2 of 4 qualify"):
        select_gpus(3, min_free_bytes=20 * GIB, source=_box(), env={})


def test_nvml_source_reads_through_the_nvml_interface():
    class FakeNvml:
        def nvmlInit(self): pass
        def nvmlShutdown(self): pass
        def nvmlDeviceGetCount(self): return 1
        def nvmlDeviceGetHandleByIndex(self, i): return i
        def nvmlDeviceGetMemoryInfo(self, h): return type("M", (), {"free": 5 * GIB, "total": 16 * GIB})()
        def nvmlDeviceGetUtilizationRates(self, h): return type("U", (), {"gpu": 12})()
        def nvmlDeviceGetName(self, h): return b"Tesla T4"
        def nvmlDeviceGetUUID(self, h): return "GPU-t4"

    (gpu,) = NvmlGpuSource(FakeNvml()).gpus()
    assert gpu == GpuState(0, "GPU-t4", "Tesla T4", 5 * GIB, 16 * GIB, 12.0)


def test_without_a_gpu_caps_are_refused_and_releasing_memory_is_a_no_op():
    if torch.cuda.is_available():
        pytest.skip("this test is for machines without a GPU")
    with pytest.raises(GuardError, match="needs a CUDA GPU"):
        cap_memory(0.5)
    assert release_cached_memory() == 0
