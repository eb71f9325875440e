"""Data parallelism's memory is in every estimate and fit check, not only the single-GPU peak."""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import TracedModel
from gpuwise.workload import Workload
from gpuwise.workload.storage import trainable_bytes


@pytest.fixture(scope="module")
def a4000():
    return resolve_gpu(load_catalog(user_file=False), "rtx-a4000")


@pytest.mark.slow
def test_ddp_peak_exceeds_the_single_gpu_peak_by_at_least_the_bucket_bytes(a4000):
    # the defect: --num-gpus 8 reported the single-GPU peak, without DDP's gradient buckets
    w = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-fp16")
    model = TracedModel(w)
    one = model.estimate(a4000, count=1, with_time=False).memory
    eight = model.estimate(a4000, count=8, with_time=False).memory
    buckets = model.trace().trainable_param_count * trainable_bytes("amp-fp16")
    assert eight.total_bytes - one.total_bytes >= buckets
    assert eight.peak_allocated_bytes - one.peak_allocated_bytes >= buckets
    assert any("DDP gradient buckets" in n for n in eight.notes)
    parts = ("weights", "gradients", "optimizer", "activations", "workspace", "other")
    assert sum(getattr(eight, f"{p}_bytes") for p in parts) == eight.peak_allocated_bytes


@pytest.mark.slow
def test_zero3_holds_a_shard_of_the_weights_and_optimizer_state(a4000):
    w = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-fp16", sharding="zero3")
    model = TracedModel(w)
    one = model.estimate(a4000, count=1, with_time=False).memory
    eight = model.estimate(a4000, count=8, with_time=False).memory
    assert eight.optimizer_bytes < one.optimizer_bytes and eight.weights_bytes < one.weights_bytes
