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


@pytest.mark.parametrize("count", [0, -1, 1.5, True])
def test_select_refuses_a_count_below_one(count):
    # the defect: select_gpus(-1) took 3 GPUs (a [:count] slice), select_gpus(0) hid every GPU
    env: dict[str, str] = {}
    with pytest.raises(GuardError, match=r"select_gpus needs a GPU count >= 1, got "):
        select_gpus(count, source=_box(), env=env)
    assert env == {}


@pytest.mark.parametrize("visible, order, chosen", [
    ("3", None, ["GPU-ddd"]),                              # an index (one GPU model: PCI order)
    ("0,3", None, ["GPU-ddd"]),                            # the freest of those visible, not GPU-ccc
    ("GPU-aaa,GPU-ddd", None, ["GPU-ddd"]),                # UUIDs
    ("GPU-dd", None, ["GPU-ddd"]),                         # a unique UUID prefix, as CUDA accepts
    ("0, 3", "PCI_BUS_ID", ["GPU-ddd"]),
])
def test_select_chooses_only_among_the_gpus_already_visible(visible, order, chosen):
    # the defect: an existing CUDA_VISIBLE_DEVICES (a scheduler's allocation) was overwritten with GPU-ccc
    env = {"CUDA_VISIBLE_DEVICES": visible, **({"CUDA_DEVICE_ORDER": order} if order else {})}
    assert [g.uuid for g in select_gpus(1, source=_box(), env=env)] == chosen
    assert env == {"CUDA_VISIBLE_DEVICES": ",".join(chosen), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@pytest.mark.parametrize("visible, says", [
    ("0,3", "asked for 2 GPU(s) with >= 20.0 GiB free; 0 of 2 (of those CUDA_VISIBLE_DEVICES=0,3 names) qualify"),
    ("", "CUDA_VISIBLE_DEVICES is empty: no GPU is visible to choose from"),
    ("7", "CUDA_VISIBLE_DEVICES=7: no GPU 7 (4 GPU(s) on this machine)"),
    ("GPU-zzz", "CUDA_VISIBLE_DEVICES=GPU-zzz: 'GPU-zzz' names no GPU NVML lists"),
])
def test_select_refuses_what_the_visible_gpus_cannot_give(visible, says):
    env = {"CUDA_VISIBLE_DEVICES": visible}
    with pytest.raises(GuardError) as refused:
        select_gpus(2, min_free_bytes=20 * GIB, source=_box(), env=env)
    assert str(refused.value) == says
    assert env == {"CUDA_VISIBLE_DEVICES": visible}, "left as it was"


def test_cuda_indices_on_a_box_of_mixed_gpus_need_pci_order_or_uuids():
    mixed = FakeGpuSource([GpuState(0, "GPU-aaa", "NVIDIA A100-SXM4-80GB", 70 * GIB, 80 * GIB, 0.0),
                           GpuState(1, "GPU-bbb", "NVIDIA GeForce RTX 4090", 20 * GIB, 24 * GIB, 0.0)])
    with pytest.raises(GuardError, match="names GPUs by CUDA index, which counts fastest first"):
        select_gpus(1, source=mixed, env={"CUDA_VISIBLE_DEVICES": "1"})
    env = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert [g.uuid for g in select_gpus(1, source=mixed, env=env)] == ["GPU-bbb"]


def test_select_inside_a_torchrun_worker_is_refused_and_the_launcher_form_prints_the_choice(capsys, monkeypatch):
    for name in ("CUDA_VISIBLE_DEVICES", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(GuardError, match=r"inside a torchrun worker.*CUDA_VISIBLE_DEVICES=\$\(python -m "
                                         r"gpuwise.guard.devices N\) torchrun"):
        select_gpus(1, source=_box(), env={"LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    from gpuwise.guard.devices import main

    assert main(["2", "--min-free-gib", "20"], source=_box()) == 0
    assert capsys.readouterr().out == "GPU-ccc,GPU-bbb\n"
    assert main(["3", "--min-free-gib", "20"], source=_box()) == 2
    err = capsys.readouterr().err
    assert err == "gpuwise.guard: error: asked for 3 GPU(s) with >= 20.0 GiB free; 2 of 4 qualify\n"
