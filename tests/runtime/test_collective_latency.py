"""The link constants of NCCL collectives (issue 24): a latency per hop per link kind and one latency per
collective, fitted on vidur's measured all-reduces (benchmarks/collectives.py). Behaviour, not figures:
vidur's eager all-reduces of a few KB take 30-50 us on 2, 4 and 8 NVSwitch GPUs alike (DGX A100 and
H100), so most of a small all-reduce is what every collective pays once, not its hops."""

from __future__ import annotations

import math

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import INTRA_KINDS, collective_latency_s, topology_data, topology_for
from gpuwise.runtime.comm import collective_s

KiB, MiB = 2**10, 2**20


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


def test_shipped_latencies_are_physical():
    """A hop over NVLink or PCIe takes microseconds (NCCL's own tuning: ~0.6-6 us a step), never less than
    1 us or more than 100 us; a collective's fixed cost is under 100 us; efficiencies are shares."""
    data = topology_data()
    for kind in INTRA_KINDS:
        assert 1e-6 <= data["link"][kind]["latency_s"] <= 100e-6, kind
        assert 0 < data["link"][kind]["bus_efficiency"] <= 1, kind
    for kind, spec in data["network"].items():
        assert 1e-6 <= spec["latency_s"] <= 100e-6, kind
    assert 0 <= collective_latency_s(data) <= 100e-6


def test_a_small_all_reduce_costs_mostly_its_fixed_latency_not_its_hops(cat):
    """Fails with hops alone (10 us a hop: 20 us on 2 GPUs, 60 us on 8, 3x); vidur measures them alike."""
    topo = topology_for(resolve_gpu(cat, "h100-sxm"))
    two, eight = (collective_s("all_reduce", 4 * KiB, n, topo) for n in (2, 8))
    assert eight < 1.5 * two


@pytest.mark.parametrize("gpu_id", ["h100-sxm", "a100-80gb-sxm4"])
def test_a_latency_bound_all_reduce_on_8_nvswitch_gpus_costs_at_most_the_trees_extra_hops_over_4(cat, gpu_id):
    topo = topology_for(resolve_gpu(cat, gpu_id))
    hop_s = topo.ring_link(8).latency_s
    four, eight = (collective_s("all_reduce", 4 * KiB, n, topo) for n in (4, 8))
    extra_hops = 2 * (math.ceil(math.log2(8)) - math.ceil(math.log2(4)))
    assert four <= eight <= four + extra_hops * hop_s + 1e-12


@pytest.mark.parametrize("gpu_id, intra", [("h100-sxm", "nvswitch"), ("a100-80gb-pcie", "nvlink-bridge"),
                                           ("rtx-4090", "pcie-host"), ("v100-16gb-sxm2", "nvlink-mesh")])
@pytest.mark.parametrize("kind", ["all_reduce", "reduce_scatter", "all_gather"])
def test_collective_time_grows_with_size_on_every_link(cat, gpu_id, intra, kind):
    topo = topology_for(resolve_gpu(cat, gpu_id), intra=intra)
    sizes = [2 ** k for k in range(1, 34)]        # 2 B .. 8 GiB: through the tree -> ring switch
    for count in (2, 4, 8, 16):
        times = [collective_s(kind, s, count, topo) for s in sizes]
        assert all(b >= a for a, b in zip(times, times[1:])), (count, kind)


def test_the_collective_latency_is_paid_once_across_nodes_not_per_level(cat):
    """A two-node all-reduce is one NCCL collective: its fixed cost once, beside both levels' hops."""
    topo = topology_for(resolve_gpu(cat, "h100-sxm"), "aws")
    one_node = collective_s("all_reduce", 4 * KiB, 8, topo)
    two_nodes = collective_s("all_reduce", 4 * KiB, 16, topo)
    net = topo.network
    inter_s = min(2 * (1 / 2 * 4 * KiB / (net.bus_gbs * 1e9) + net.latency_s),
                  2 * (net.latency_s + 4 * KiB / (net.bus_gbs * 1e9)))
    assert two_nodes == pytest.approx(one_node + inter_s)
    assert topo.collective_latency_s > 0


def test_large_buffers_are_bandwidth_bound(cat):
    """At 1 GiB the latencies are under 1% of an all-reduce over NVSwitch: the bus bandwidth decides."""
    topo = topology_for(resolve_gpu(cat, "h100-sxm"))
    link = topo.ring_link(8)
    t = collective_s("all_reduce", 1024 * MiB, 8, topo)
    assert t == pytest.approx(2 * 7 / 8 * 1024 * MiB / (link.bus_gbs * 1e9), rel=0.01)
