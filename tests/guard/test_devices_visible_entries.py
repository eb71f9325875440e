"""``select_gpus`` reads CUDA_VISIBLE_DEVICES with the shared reader (``gpuwise.visible_devices``) and refuses, in one
line, each entry it cannot map to a whole GPU. The defects: "²" (a digit to ``str.isdigit``) ended it with a
ValueError; an empty entry ("1,,3", ",0") was a UUID prefix of every GPU ("'' matches several GPUs", or on a box of
one GPU that GPU, though CUDA stops at an empty entry); a MIG instance (a scheduler's MIG slice) was "no GPU NVML
lists"; an upper-case UUID prefix, which the report accepts, named no GPU."""

from __future__ import annotations

import pytest

from gpuwise.guard import GuardError
from gpuwise.guard.devices import FakeGpuSource, GpuState, select_gpus

GIB = 2**30


def _box(count: int = 4) -> FakeGpuSource:
    return FakeGpuSource([GpuState(i, f"GPU-{'abcd'[i] * 3}", "NVIDIA GeForce RTX 4090", 23 * GIB, 24 * GIB, 0.0)
                          for i in range(count)])


@pytest.mark.parametrize("count, visible, says", [
    (4, "0,²", "CUDA_VISIBLE_DEVICES=0,²: '²' names no GPU NVML lists"),
    (4, "1,,3", "CUDA_VISIBLE_DEVICES=1,,3: an empty entry names no GPU (CUDA ignores it and every entry after it)"),
    (4, "1,2,", "CUDA_VISIBLE_DEVICES=1,2,: an empty entry names no GPU (CUDA ignores it and every entry after it)"),
    (1, ",0", "CUDA_VISIBLE_DEVICES=,0: an empty entry names no GPU (CUDA ignores it and every entry after it)"),
    (4, "MIG-5c2f", "CUDA_VISIBLE_DEVICES=MIG-5c2f: 'MIG-5c2f' is a MIG instance, and select_gpus chooses among "
                    "whole GPUs: a MIG instance given is already the choice, keep it"),
    (4, "MIG-GPU-aaa/1/0", "CUDA_VISIBLE_DEVICES=MIG-GPU-aaa/1/0: 'MIG-GPU-aaa/1/0' is a MIG instance, and "
                           "select_gpus chooses among whole GPUs: a MIG instance given is already the choice, keep it"),
])
def test_an_entry_naming_no_whole_gpu_is_refused_in_one_line_saying_why(count, visible, says):
    env = {"CUDA_VISIBLE_DEVICES": visible}
    with pytest.raises(GuardError) as refused:
        select_gpus(1, source=_box(count), env=env)
    assert str(refused.value) == says
    assert env == {"CUDA_VISIBLE_DEVICES": visible}, "left as it was"


@pytest.mark.parametrize("visible, chosen", [("GPU-DD", "GPU-ddd"), (" gpu-CcC , 3", "GPU-ccc")])
def test_a_uuid_prefix_names_its_gpu_whatever_its_case(visible, chosen):
    env = {"CUDA_VISIBLE_DEVICES": visible}
    assert [g.uuid for g in select_gpus(1, source=_box(), env=env)] == [chosen]
    assert env["CUDA_VISIBLE_DEVICES"] == chosen
