"""A checkpoint is the model's weights and its optimizer state, which do not depend on the GPU or the batch. Before,
the disk note counted the estimate's optimizer bytes at its peak, which add the optimizer step's temporaries: a
ResNet-50 checkpoint was 309, 312 or 313 MB by GPU and batch."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torchvision

from gpuwise.launch import disk_need
from gpuwise.workload import Workload

RESNET50 = Workload("torchvision:resnet50", optimizer="adamw", precision="fp32")
ADAMW_FP32_STATE_BYTES = 2 * 4          # exp_avg and exp_avg_sq, each a float32 per parameter


@pytest.fixture(scope="module")
def resnet50_params() -> int:
    return sum(p.numel() for p in torchvision.models.resnet50().parameters())


@pytest.fixture(scope="module")
def needs(cat):
    return [disk_need(RESNET50, SimpleNamespace(batch_size=batch, grad_accum_steps=1), cat.gpu(gpu))
            for gpu, batch in (("t4", 16), ("a100-80gb-sxm4", 32), ("rtx-4090", 64))]


def test_a_resnet_50_checkpoint_is_the_same_on_every_gpu_and_batch(needs):
    assert len({need.checkpoint_bytes for need in needs}) == 1


def test_the_checkpoint_holds_the_weights_and_adamw_s_two_states(needs, resnet50_params):
    for need in needs:
        assert need.checkpoint_bytes - need.model_bytes == ADAMW_FP32_STATE_BYTES * resnet50_params
        assert need.model_bytes == pytest.approx(4 * resnet50_params, rel=0.01)
