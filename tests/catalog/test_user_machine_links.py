"""A user's file says how their cards are linked and how many one machine holds (`intra_link`, `gpus_per_node`
on a `[[gpu]]`): before, only the shipped topology.toml could, so a lab's NVLink-bridged A6000 pair was timed over
PCIe and a 4-card machine as one of 8."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.catalog import CatalogError, load_catalog
from gpuwise.catalog.model import INTRA_KINDS
from gpuwise.catalog.topology import topology_for


def catalog_with(tmp_path: Path, body: str):
    path = tmp_path / "c.toml"
    path.write_text(body)
    return load_catalog(path, user_file=False), path


def test_a_users_bridged_pair_and_four_card_machine_are_the_topology(tmp_path):
    cat, _ = catalog_with(tmp_path, '[[gpu]]\nid = "a6000-lab"\nbased_on = "rtx-a6000"\n'
                                    'intra_link = "nvlink-bridge"\ngpus_per_node = 4\n')
    topo = topology_for(cat.gpu("a6000-lab"))
    assert topo.intra == "nvlink-bridge"
    assert topo.pair_link.kind == "nvlink-bridge"       # two cards talk over the bridge
    assert topo.ring_link(4).kind == "pcie-p2p"          # a ring of four crosses PCIe between the pairs
    assert topo.gpus_per_node == 4 and topo.nodes(5) == 2
    shipped = topology_for(load_catalog(user_file=False).gpu("rtx-a6000"))
    assert shipped.intra == "pcie-p2p" and shipped.gpus_per_node == 8   # the base GPU's machine is untouched
    assert topo.pair_link.bus_gbs > shipped.pair_link.bus_gbs


def test_the_users_link_wins_over_the_shipped_machine_of_the_same_gpu(tmp_path):
    # overriding a shipped GPU by its own id: the user knows their machine (topology.toml: a DGX-1 mesh)
    cat, _ = catalog_with(tmp_path, '[[gpu]]\nid = "v100-16gb-sxm2"\nbased_on = "v100-16gb-sxm2"\n'
                                    'intra_link = "pcie-p2p"\n')
    assert topology_for(cat.gpu("v100-16gb-sxm2")).intra == "pcie-p2p"
    assert topology_for(load_catalog(user_file=False).gpu("v100-16gb-sxm2")).intra == "nvlink-mesh"
    # an explicit link (a benchmark's system) still wins
    assert topology_for(cat.gpu("v100-16gb-sxm2"), intra="nvswitch").intra == "nvswitch"


@pytest.mark.parametrize("line, words", [
    ('intra_link = "nvlink"', "is not one of"),
    ('intra_link = "nvswitch"', "give nvlink_gbs"),        # an RTX 4090 has no NVLink
    ("gpus_per_node = 0", "from 1 to 64"),
    ("gpus_per_node = true", "whole number"),
    ("intra_link = 3", "must be a string"),
])
def test_a_link_that_cannot_be_is_one_line_naming_the_key(tmp_path, line, words):
    with pytest.raises(CatalogError) as err:
        catalog_with(tmp_path, f'[[gpu]]\nid = "x4090"\nbased_on = "rtx-4090"\n{line}\n')
    message = str(err.value)
    assert "\n" not in message and words in message
    assert ("intra_link" in message) or ("gpus_per_node" in message)


def test_every_link_kind_a_user_may_name_is_one_topology_times(tmp_path):
    for kind in INTRA_KINDS:
        cat, _ = catalog_with(tmp_path, f'[[gpu]]\nid = "h100-lab"\nbased_on = "h100-sxm"\nintra_link = "{kind}"\n')
        assert topology_for(cat.gpu("h100-lab")).intra == kind


def test_the_cli_times_the_users_link_and_says_it(tmp_path, cli_run):
    _, path = catalog_with(tmp_path, '[[gpu]]\nid = "a6000-lab"\nbased_on = "rtx-a6000"\nintra_link = "nvlink-bridge"\n')
    code, out, err = cli_run("gpus", "a6000-lab", "--catalog", str(path), "--json")
    assert code == 0, err
    (gpu,) = json.loads(out)["gpus"]
    assert gpu["intra_link"] == "nvlink-bridge" and gpu["gpus_per_node"] is None
