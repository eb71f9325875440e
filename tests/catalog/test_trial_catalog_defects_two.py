"""The second trial of the catalog: --min-memory against the figure the GiB column shows, the links of your own
GPUs, a file that gives one entry twice, a price for a MIG slice, and the doc's count of shipped offers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuwise.catalog import CatalogError, load_catalog
from gpuwise.catalog.query import select_gpus
from gpuwise.catalog.topology import topology_for
from gpuwise.cli.gpus import _gib

CATALOG = load_catalog(user_file=False)
DOC = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"


def doc_example(tmp_path) -> Path:
    """The example catalog file docs/catalog.md shows under "Adding your own GPUs and prices"."""
    section = DOC.read_text().split("## Adding your own GPUs and prices", 1)[1].split("## Python API", 1)[0]
    (toml,) = [block for block in re.findall(r"```toml\n(.*?)```", section, re.S) if 'id = "titan-rtx"' in block]
    path = tmp_path / "my.toml"
    path.write_text(toml)
    return path


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


# --- 2. --min-memory compares what the GiB column shows ----------------------------------------------------------

@pytest.mark.parametrize("size, gpu_id", [("24GiB", "rtx-4090"), ("48GiB", "rtx-a6000"), ("45GiB", "l40s")])
def test_min_memory_keeps_a_gpu_whose_column_shows_that_much(size, gpu_id, cli_run):
    # before: the RTX 4090 (NVML 23.988 GiB, shown as 24) was left out by --min-memory 24GiB
    gpu = CATALOG.gpu(gpu_id)
    assert _gib(gpu.visible_memory_bytes) == size.removesuffix("GiB")
    code, out, err = cli_run("gpus", "--min-memory", size, "--json")
    assert code == 0, err
    assert gpu_id in {g["id"] for g in json.loads(out)["gpus"]}


def test_every_gpu_min_memory_keeps_shows_at_least_that_much():
    for gib in (16, 24, 45, 48, 80):
        kept = {r.gpu.id for r in select_gpus(CATALOG, min_memory_bytes=gib * 2**30)}
        shown = {g.id for g in CATALOG.gpus if float(_gib(g.visible_memory_bytes)) >= gib}
        assert kept == shown, gib


# --- 3. the links of your own GPUs ---------------------------------------------------------------------------------

def test_the_docs_titan_rtx_with_nvlink_and_no_form_factor_is_no_nvswitch_board(tmp_path):
    # before: nvlink_gbs without a form factor was modelled as an 8-GPU NVSwitch (SXM) machine
    catalog = load_catalog(doc_example(tmp_path), user_file=False)
    assert topology_for(catalog.gpu("titan-rtx")).intra == "pcie-p2p"   # a PCIe card, as the shipped ones with NVLink


def test_a_variant_of_a_geforce_card_keeps_its_no_peer_to_peer_link(tmp_path):
    # before: rtx-4090-48gb (based_on rtx-4090, named "RTX 4090 48GB (modded)") got PCIe peer-to-peer
    catalog = load_catalog(doc_example(tmp_path), user_file=False)
    variant = catalog.gpu("rtx-4090-48gb")
    assert variant.geforce
    assert topology_for(variant).intra == topology_for(catalog.gpu("rtx-4090")).intra == "pcie-host"


GPU_TABLE = """
[[gpu]]
id = "my-board"
based_on = "a100-40gb-pcie"
{extra}
"""


@pytest.mark.parametrize("extra, intra", [
    ('form_factor = "SXM4"', "nvswitch"),       # stated: an SXM board with NVLink is an NVSwitch machine
    ("", "pcie-p2p"),                           # inherited: the PCIe card's
    ("geforce = true", "pcie-host"),            # stated: GeForce-ness
])
def test_a_gpu_of_yours_can_state_its_form_factor_and_geforce_ness(tmp_path, extra, intra):
    catalog = load_catalog(write(tmp_path, GPU_TABLE.format(extra=extra)), user_file=False)
    assert topology_for(catalog.gpu("my-board")).intra == intra


def test_a_form_factor_the_link_rules_cannot_read_is_refused(tmp_path):
    with pytest.raises(CatalogError) as err:
        load_catalog(write(tmp_path, GPU_TABLE.format(extra='form_factor = "SMX4"')), user_file=False)
    assert "key 'form_factor'" in str(err.value) and "\n" not in str(err.value)


# --- 6. one entry twice in one file ------------------------------------------------------------------------------

OFFER = """
[[offer]]
provider = "{provider}"
gpu = "{gpu}"
price_per_hour = 1.5
currency = "CNY"
source = "mine"
checked = "2026-12-01"
"""


def test_two_offers_with_one_identity_in_a_file_are_refused(tmp_path):
    # before: silently merged, the last one winning
    text = OFFER.format(provider="autodl", gpu="RTX 4090") + OFFER.format(provider="AutoDL", gpu="rtx-4090")
    with pytest.raises(CatalogError) as err:
        load_catalog(write(tmp_path, text), user_file=False)
    message = str(err.value)
    assert "offer[1]" in message and "offer[0]" in message and "rtx-4090" in message and "\n" not in message


def test_two_gpus_with_one_id_in_a_file_are_refused(tmp_path):
    text = GPU_TABLE.format(extra="") * 2
    with pytest.raises(CatalogError) as err:
        load_catalog(write(tmp_path, text), user_file=False)
    message = str(err.value)
    assert "gpu[1]" in message and "'my-board'" in message and "\n" not in message


def test_a_file_may_still_override_a_shipped_offer_and_gpu(tmp_path):
    text = OFFER.format(provider="autodl", gpu="RTX 4090") + '[[gpu]]\nid = "rtx-4090"\nbased_on = "rtx-4090"\ntdp_w = 400\n'
    catalog = load_catalog(write(tmp_path, text), user_file=False)
    assert catalog.gpu("rtx-4090").tdp_w == 400
    assert [o.price_per_hour for o in catalog.offers_for("rtx-4090", provider="autodl") if o.count == 1] == [1.5]


def test_the_duplicate_exits_2_in_one_line(tmp_path, cli_run):
    text = OFFER.format(provider="autodl", gpu="t4") * 2
    code, out, err = cli_run("gpus", "--catalog", str(write(tmp_path, text)))
    assert code == 2 and out == "" and err.count("\n") == 1 and "given twice" in err


# --- 7. a price for a MIG slice ----------------------------------------------------------------------------------

SLICE = "a100-40gb-sxm4-mig-3g.20gb"


@pytest.mark.parametrize("name", [SLICE, "NVIDIA A100-SXM4-40GB MIG 3g.20gb"])
def test_an_offer_may_price_a_mig_slice_by_any_name_gpus_resolves(tmp_path, name):
    # before: "unknown GPU 'a100-40gb-sxm4-mig-3g.20gb' (did you mean ...)"
    catalog = load_catalog(write(tmp_path, OFFER.format(provider="lab", gpu=name)), user_file=False)
    (offer,) = catalog.offers_for(SLICE)
    assert offer.gpu_id == SLICE == catalog.gpu(name).id
    assert SLICE in {g.id for g in catalog.gpus}      # priced, so a GPU the planner can quote
    # the slice is named in full: the GPU's own short names still find the GPU alone
    assert catalog.gpu("a100-40gb-s").id == "a100-40gb-sxm4"


def test_an_offer_for_a_slice_the_gpu_lacks_is_refused(tmp_path):
    with pytest.raises(CatalogError) as err:
        load_catalog(write(tmp_path, OFFER.format(provider="lab", gpu="a100-40gb-sxm4 MIG 8g.40gb")), user_file=False)
    assert "offer[0]: key 'gpu'" in str(err.value)


# --- the doc's count of shipped offers ------------------------------------------------------------------------------

def test_the_doc_counts_the_shipped_gpus_and_offers_as_they_are():
    # before: "85 indicative offers" where 88 ship
    text = DOC.read_text()
    gpus = re.search(r"\*\*(\d+) GPUs\*\*", text)
    offers = re.search(r"\*\*(\d+) indicative offers\*\*", text)
    assert gpus and int(gpus[1]) == len(CATALOG.gpus)
    assert offers and int(offers[1]) == len(CATALOG.offers)
