"""Trial 7 of the calibration: the share an estimate's calibration line gives the classes no run carried is theirs.

ResNet-50 amp-fp16 on an H100 under an RTX 4090's calibration read "launch (20% of this step) never seen in those 2
runs": launch was 14% of the step; 20% was every unseen class together (copy, optimizer, reduction, matmul, each
under 5% and not named).
"""

from __future__ import annotations

import pytest

from gpuwise.calibrate.apply import describe
from gpuwise.calibrate.fit import FitRow, fit_gpu
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime.model import StepTime

H100 = resolve_gpu(load_catalog(None), "h100-sxm")
# a step whose conv the runs carried; launch (14%) and three slivers (6% together) they never did
STEP_BY_CLASS_S = {"conv": 0.0160, "launch": 0.0028, "copy": 0.0006, "optimizer": 0.0004, "reduction": 0.0002}


@pytest.fixture(scope="module")
def conv_calibration():
    return fit_gpu("rtx-4090", [FitRow("a", {"conv/fp16": 0.012}, 0.0, 0.018)])


def test_the_unseen_share_counts_only_the_classes_it_names(conv_calibration):
    total_s = sum(STEP_BY_CLASS_S.values())
    step = StepTime(gpu=H100.id, count=1, step_time_s=total_s, samples_per_s=64 / total_s,
                    by_class_s=dict(STEP_BY_CLASS_S), bound="compute", compute_s=total_s, micro_step_s=total_s)
    text = describe(step, conv_calibration, "amp-fp16", H100)
    launch_share = STEP_BY_CLASS_S["launch"] / total_s
    assert f"launch ({launch_share:.0%} of this step) never seen in that run" in text
