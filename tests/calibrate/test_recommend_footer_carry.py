"""recommend's footer said every other GPU carries the calibration of the GPU with the most runs, also when two
GPUs are calibrated and each GPU now carries the closest one's (an A100 PCIe the A100 SXM4's, not the RTX
4090's): with several it says the rule, with one it names that GPU."""

from __future__ import annotations

from types import SimpleNamespace

from gpuwise.cli.recommend import _carried_from


def test_one_calibrated_gpu_is_named_and_several_are_not_said_to_be_one():
    one = [SimpleNamespace(gpu="rtx-4090")]
    two = [SimpleNamespace(gpu="rtx-4090"), SimpleNamespace(gpu="a100-40gb-sxm4")]
    assert _carried_from(one) == "rtx-4090"
    assert _carried_from(two) is None and _carried_from([]) is None
