"""Memory of data parallelism: DDP's buckets and NCCL's buffers on top of the single-GPU peak; what ZeRO/FSDP
shard away, and the gathered units they hold instead."""

from __future__ import annotations

import pytest

from gpuwise.memory.parallel import data_parallel_memory, nccl_buffer_bytes

MiB = 2**20
BERT_BASE_PARAMS = 110_000_000


def _bert_base(sharding: str, count: int = 8, **kw):
    return data_parallel_memory(
        sharding=sharding, count=count, weights_bytes=BERT_BASE_PARAMS * 4, gradients_bytes=BERT_BASE_PARAMS * 4,
        optimizer_bytes=BERT_BASE_PARAMS * 8, layers=12, **kw)


def test_ddp_peak_exceeds_the_single_gpu_peak_by_at_least_the_bucket_bytes():
    single_gpu_peak = 4_000 * MiB
    ddp = _bert_base("ddp")
    gradients = BERT_BASE_PARAMS * 4
    assert ddp.bucket_bytes == gradients                     # ~420 MiB for BERT-base in fp32
    assert 415 * MiB < ddp.bucket_bytes < 425 * MiB
    assert single_gpu_peak + ddp.added_bytes >= single_gpu_peak + gradients + ddp.nccl_buffer_bytes
    assert ddp.nccl_buffer_bytes > 0 and ddp.sharded_saving_bytes == 0


def test_gradient_as_bucket_view_drops_the_copy_but_not_nccl():
    view = _bert_base("ddp", gradient_as_bucket_view=True)
    assert view.bucket_bytes == 0 and view.added_bytes == view.nccl_buffer_bytes > 0


def test_one_gpu_adds_nothing():
    assert _bert_base("ddp", count=1).added_bytes == 0
    assert _bert_base("zero3", count=1).added_bytes == 0


def test_each_zero_stage_shards_more_and_fsdp_holds_gathered_units_instead():
    added = {s: _bert_base(s).added_bytes for s in ("ddp", "zero1", "zero2", "zero3", "fsdp")}
    assert added["zero3"] < added["zero2"] < added["zero1"] < added["ddp"]
    assert added["zero3"] == added["fsdp"]
    zero3 = _bert_base("zero3")
    # two of 12 layers' weights gathered (this one and one prefetched) plus one layer's gradients
    assert zero3.gather_buffer_bytes == pytest.approx((2 * BERT_BASE_PARAMS * 4 + BERT_BASE_PARAMS * 4) / 12, rel=1e-6)
    # 8-way: each GPU keeps 1/8 of weights, gradients and optimizer state
    assert zero3.sharded_saving_bytes == pytest.approx(-(16 * BERT_BASE_PARAMS) * 7 / 8, rel=1e-6)


def test_nccl_opens_more_buffers_on_nvswitch_than_on_pcie_and_more_across_nodes():
    assert nccl_buffer_bytes("nvswitch") > nccl_buffer_bytes("pcie-p2p") > nccl_buffer_bytes("pcie-host")
    assert nccl_buffer_bytes("nvswitch", multi_node=True) > nccl_buffer_bytes("nvswitch")


def test_unknown_sharding_is_refused():
    with pytest.raises(ValueError):
        _bert_base("tensor-parallel")


def test_sharding_removes_only_what_the_peak_held_throughout_and_zero_keeps_its_gradient_partition():
    from gpuwise.memory.parallel import ModelState
    state = BERT_BASE_PARAMS * 4
    held = ModelState(weights_bytes=state, gradients_bytes=0, optimizer_bytes=2 * state)   # a forward peak
    fsdp = _bert_base("fsdp", held=held)
    zero2 = _bert_base("zero2", held=held)
    assert fsdp.gradients_saving_bytes == 0
    assert zero2.gradients_saving_bytes == pytest.approx(state / 8, abs=1)   # its partition, kept all step
    assert fsdp.weights_saving_bytes == pytest.approx(-state * 7 / 8, abs=1)
    assert fsdp.optimizer_saving_bytes == zero2.optimizer_saving_bytes == pytest.approx(-2 * state * 7 / 8, abs=1)
