"""The shipped topology data agrees with the catalog: every GPU and provider it names exists, every GPU gets
a topology it can have, and every provider with offers says whether it rents clusters."""

from __future__ import annotations

import pytest

from gpuwise.catalog import CatalogError, load_catalog
from gpuwise.catalog.topology import INTRA_KINDS, topology_data, topology_for


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


def test_every_gpu_named_in_the_topology_data_is_in_the_catalog(cat):
    data = topology_data()
    ids = {g.id for g in cat.gpus}
    named = [s["gpu"] for s in data["system"]]
    named += [s["gpu"] for p in data["provider"] for s in p.get("system", [])]
    assert set(named) <= ids, set(named) - ids
    assert all(s.get("intra", "nvswitch") in INTRA_KINDS for s in data["system"])


def test_every_provider_with_offers_says_whether_it_rents_clusters(cat):
    data = topology_data()
    entries = {p["name"]: p for p in data["provider"]}
    for provider in {o.provider for o in cat.offers}:
        entry = entries[provider]
        assert isinstance(entry["multi_node"], bool)
        if entry["multi_node"]:
            assert entry["network"] and entry["network_gbps_per_node"] > 0, provider
        else:
            assert entry.get("note"), provider


def test_every_catalog_gpu_at_every_provider_gets_a_topology(cat):
    providers = [None] + sorted({o.provider for o in cat.offers})
    for gpu in cat.gpus:
        for provider in providers:
            topo = topology_for(gpu, provider)
            assert topo.ring_link(8).bus_gbs > 0 and topo.network.bus_gbs > 0
            assert topo.multi_node or topo.note


def test_nvlink_kinds_are_refused_for_a_gpu_without_nvlink(cat):
    with pytest.raises(CatalogError, match="no NVLink"):
        topology_for(cat.gpu("rtx-4090"), intra="nvswitch")
    with pytest.raises(CatalogError, match="unknown link kind"):
        topology_for(cat.gpu("t4"), intra="infiniband")
