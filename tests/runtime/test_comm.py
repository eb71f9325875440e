"""The data-parallel communication timeline: DDP's buckets, overlap with backward, the links really used."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.catalog.topology import topology_for
from gpuwise.runtime.comm import (
    DDP_BUCKET_CAP_BYTES, DDP_FIRST_BUCKET_BYTES, Contention, GradReady, collective_s, data_parallel_comm,
    ddp_buckets, even_gradients, gradients_from_trace,
)
from gpuwise.trace.records import MemoryEvent, OpRecord, Trace
from gpuwise.workload import Workload

MiB = 2**20


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


def test_ddp_buckets_close_at_one_mib_first_then_at_25_mib_in_ready_order():
    grads = [GradReady(i / 100, 4 * MiB) for i in range(1, 21)]
    buckets = ddp_buckets(grads)
    assert buckets[0].size_bytes == 4 * MiB                # the first bucket closes at its 1 MiB cap
    assert all(b.size_bytes == 28 * MiB for b in buckets[1:-1])   # 7 tensors reach 25 MiB
    assert sum(b.size_bytes for b in buckets) == 80 * MiB
    assert [b.at_fraction for b in buckets] == sorted(b.at_fraction for b in buckets)
    assert buckets[1].at_fraction == grads[7].at_fraction  # ready when its last gradient is


def test_a_tensor_larger_than_the_cap_closes_the_bucket_it_lands_in():
    embedding = 90 * MiB
    grads = [GradReady(0.1, 0.5 * MiB), GradReady(0.2, 0.6 * MiB), GradReady(0.5, 3 * MiB), GradReady(1.0, embedding)]
    buckets = ddp_buckets(grads)
    assert buckets[0].size_bytes == pytest.approx(1.1 * MiB)
    assert buckets[-1].size_bytes == 3 * MiB + embedding and buckets[-1].at_fraction == 1.0
    assert ddp_buckets([GradReady(1.0, embedding)])[0].size_bytes == embedding
    assert DDP_FIRST_BUCKET_BYTES < DDP_BUCKET_CAP_BYTES


def test_comm_is_not_hidden_just_because_it_is_shorter_than_backward(cat):
    # The old model exposed only the last bucket when the all-reduce fit inside backward. 8 A4000s over
    # PCIe, BERT-base-sized fp32 gradients: most buckets are ready late, so much of it is exposed.
    gpu = cat.gpu("rtx-a4000")
    grad_bytes = 110e6 * 4
    total = collective_s("all_reduce", grad_bytes, 8, topology_for(gpu))
    backward_s = 2 * total
    late = [GradReady(0.5 + 0.5 * (k + 1) / 12, grad_bytes / 12) for k in range(12)]
    comm = data_parallel_comm(sharding="ddp", count=8, gpu=gpu, grad_bytes=grad_bytes, param_bytes=grad_bytes,
                              forward_s=backward_s / 2, backward_s=backward_s, gradients=late)
    assert comm.exposed_s > 0.4 * total
    last_bucket = ddp_buckets(late)[-1].size_bytes
    assert comm.exposed_s > collective_s("all_reduce", last_bucket, 8, topology_for(gpu))


def test_earlier_ready_gradients_hide_more_and_contention_never_hides_everything(cat):
    gpu = cat.gpu("h100-sxm")
    kw = dict(sharding="ddp", count=8, gpu=gpu, grad_bytes=400e6, param_bytes=400e6, forward_s=0.05, backward_s=0.1)
    even = data_parallel_comm(**kw, gradients=even_gradients(400e6, 24))
    at_end = data_parallel_comm(**kw, gradients=[GradReady(1.0, 400e6)])
    assert even.exposed_s < at_end.exposed_s
    assert at_end.exposed_s >= at_end.total_s
    free = data_parallel_comm(**kw, gradients=even_gradients(400e6, 24), contention=Contention(0.0, 1.0))
    assert free.exposed_s < even.exposed_s


def test_a_two_card_bridge_is_not_an_nvswitch(cat):
    # PCIe A100/H100, 3090, A6000 ... used to get NVLink ring bandwidth at x8.
    for gid in ("a100-80gb-pcie", "h100-pcie", "rtx-3090", "rtx-a6000", "a40", "rtx-2080-ti"):
        gpu = cat.gpu(gid)
        assert topology_for(gpu).ring_link(8).kind in ("pcie-p2p", "pcie-host"), gid
        bridged = topology_for(gpu, intra="nvlink-bridge")
        assert bridged.ring_link(2).kind == "nvlink-bridge"
        assert bridged.ring_link(4).kind == "pcie-p2p"
        assert bridged.ring_link(2).bus_gbs > bridged.ring_link(8).bus_gbs
    assert topology_for(cat.gpu("h100-sxm")).ring_link(8).kind == "nvswitch"
    assert topology_for(cat.gpu("v100-16gb-sxm2")).ring_link(8).kind == "nvlink-mesh"


def test_a_pcie_system_scales_worse_than_the_nvswitch_system_of_the_same_gpu(cat):
    gpu = cat.gpu("h100-sxm")
    kw = dict(sharding="ddp", count=8, gpu=gpu, grad_bytes=1.3e9, param_bytes=1.3e9, forward_s=0.1, backward_s=0.2)
    nvswitch = data_parallel_comm(**kw)
    pcie = data_parallel_comm(**kw, topology=topology_for(gpu, intra="pcie-p2p"))
    assert pcie.exposed_s > nvswitch.exposed_s and pcie.link == "pcie-p2p" and nvswitch.link == "nvswitch"


def test_geforce_without_p2p_scales_worse_than_with(cat):
    gpu = cat.gpu("rtx-4090")
    kw = dict(sharding="ddp", count=4, gpu=gpu, grad_bytes=440e6, param_bytes=440e6, forward_s=0.03, backward_s=0.06)
    without = data_parallel_comm(**kw)
    with_p2p = data_parallel_comm(**kw, topology=topology_for(gpu, intra="pcie-p2p"))
    assert without.link == "pcie-host" and with_p2p.link == "pcie-p2p"
    assert without.exposed_s > with_p2p.exposed_s
    assert any("peer-to-peer" in n for n in without.notes)


def test_beyond_one_node_the_network_decides_and_a_provider_without_clusters_says_so(cat):
    gpu = cat.gpu("rtx-4090")
    kw = dict(sharding="ddp", gpu=gpu, grad_bytes=440e6, param_bytes=440e6, forward_s=0.03, backward_s=0.06)
    eight = data_parallel_comm(count=8, provider="autodl", **kw)
    sixteen = data_parallel_comm(count=16, provider="autodl", **kw)
    assert sixteen.nodes == 2 and sixteen.exposed_s > eight.exposed_s and sixteen.link == "ethernet"
    assert any("AutoDL rents single machines" in n for n in sixteen.notes)
    h100 = cat.gpu("h100-sxm")
    efa = data_parallel_comm(count=16, gpu=h100, provider="aws", **{k: v for k, v in kw.items() if k != "gpu"})
    assert efa.link == "nvswitch" or efa.bus_gbs > 100   # 3200 Gb/s EFA: the network is not the bottleneck
    assert not any("assumed" in n for n in efa.notes)


def test_collective_time_grows_with_nodes_and_hierarchy_keeps_intra_node_traffic_inside(cat):
    topo = topology_for(cat.gpu("h100-sxm"), "aws")
    times = [collective_s("all_reduce", 1e9, n, topo) for n in (8, 16, 32, 64)]
    assert times == sorted(times) and times[1] > times[0]
    # the ring's hops and bytes halve; the collective's fixed latency is paid once by each
    base = topo.collective_latency_s
    assert collective_s("reduce_scatter", 1e9, 8, topo) - base == pytest.approx(
        (collective_s("all_reduce", 1e9, 8, topo) - base) / 2)


def test_sharded_modes_pay_gathers_and_zero2_reduces_every_micro_step(cat):
    gpu = cat.gpu("a100-80gb-sxm4")
    kw = dict(count=8, gpu=gpu, grad_bytes=4e9, param_bytes=2e9, forward_s=0.2, backward_s=0.4, layers=32)
    ddp = data_parallel_comm(sharding="ddp", **kw)
    zero1 = data_parallel_comm(sharding="zero1", micro_steps=4, **kw)
    zero2 = data_parallel_comm(sharding="zero2", micro_steps=4, **kw)
    zero3 = data_parallel_comm(sharding="zero3", **kw)
    assert zero2.total_s > zero1.total_s > 0
    assert zero3.total_s > ddp.total_s
    assert zero3.buckets == 32
    with pytest.raises(ValueError):
        data_parallel_comm(sharding="tp", **kw)


def test_gradient_ready_times_come_from_the_trace_op_order_and_predicted_times():
    def op(i, phase):
        return OpRecord(index=i, op="aten.mm.default", phase=phase, module="", input_shapes=(), input_dtypes=(),
                        output_shapes=(), output_dtypes=(), flops=0, bytes_read=0, bytes_written=0)

    ops = (op(0, "forward"), op(1, "backward"), op(2, "backward"), op(3, "backward"), op(4, "optimizer"))
    events = (
        MemoryEvent(0, "alloc", 1, 100, "gradients", "backward", op_index=-1),   # warm-up step: ignored
        MemoryEvent(1, "alloc", 2, 400, "gradients", "backward", op_index=1),
        MemoryEvent(2, "alloc", 3, 800, "gradients", "backward", op_index=3),
        MemoryEvent(3, "alloc", 4, 999, "activations", "backward", op_index=2),
    )
    trace = Trace(Workload(model="test:x"), ops, events, param_count=300, trainable_param_count=300, samples_per_step=1)
    ready = gradients_from_trace(trace, [0.1, 0.3, 0.6])
    assert ready == (GradReady(0.1, 400.0), GradReady(1.0, 800.0))
    assert gradients_from_trace(Trace(trace.workload, ops, (), 300, 300, 1), [0.1, 0.3, 0.6]) is None
