"""GCP sells the A100 in machines of 1, 2, 4 and 8 GPUs (a2-highgpu for the 40 GB, a2-ultragpu for the 80 GB), at
one price per GPU across the shapes: the catalog lists each, so that a job of 2 or 4 A100s is quoted on GCP (a cloud
of fixed shapes is quoted only at the counts its offers list; before, GCP offered only 1 and 8 of the 40 GB and 1 of
the 80 GB)."""

from __future__ import annotations

import pytest

from gpuwise.catalog import builtin_catalog, load_catalog
from gpuwise.catalog.query import select_gpus
from gpuwise.plan.offers import candidate_offers, cheapest_offer

CATALOG = builtin_catalog()
GPUS = ("a100-40gb-sxm4", "a100-80gb-sxm4")


def gcp_on_demand(gpu_id: str) -> dict[int, object]:
    (row,) = select_gpus(CATALOG, [gpu_id], provider="gcp")
    return {o.count: o for o in row.offers if not o.spot}


@pytest.mark.parametrize("gpu_id", GPUS)
def test_gcp_lists_the_a100_in_every_machine_shape_it_sells(gpu_id):
    assert sorted(gcp_on_demand(gpu_id)) == [1, 2, 4, 8]


@pytest.mark.parametrize("gpu_id", GPUS)
def test_each_shape_costs_the_same_per_gpu_and_is_dated_and_sourced_as_its_siblings(gpu_id):
    offers = gcp_on_demand(gpu_id)
    single = offers[1]
    for count, offer in offers.items():
        assert offer.price_per_gpu_hour == pytest.approx(single.price_per_gpu_hour, abs=0.01), count
        assert offer.checked == single.checked and offer.region == single.region
        assert offer.source.startswith(single.source.split("(")[0]) and f"-{count}g" in offer.source


@pytest.mark.parametrize("gpu_id", GPUS)
@pytest.mark.parametrize("count", [2, 4])
def test_the_offer_picker_rents_2_or_4_a100s_on_gcp_as_one_machine(gpu_id, count):
    offer = cheapest_offer(candidate_offers(CATALOG, provider="gcp"), CATALOG.gpu(gpu_id), count, "USD")
    assert offer is not None and offer.provider == "gcp" and offer.count == count
    assert offer.price_per_hour == gcp_on_demand(gpu_id)[count].price_per_hour


OWN_SHAPES = """
[[offer]]
provider = "lab"
gpu = "a100-40gb-sxm4"
count = {count}
price_per_hour = {price}
currency = "USD"
source = "lab price list"
checked = "2026-12-01"
"""


def test_offers_equal_per_gpu_as_shown_list_the_fewest_gpus_first(tmp_path):
    # before: 1, 8, 2 GPUs, ordered by $3.67 < $3.67375 < $3.675 per GPU-hour, all shown as $3.67
    path = tmp_path / "shapes.toml"
    path.write_text("".join(OWN_SHAPES.format(count=n, price=p) for n, p in ((8, 29.39), (2, 7.35), (1, 3.67))))
    catalog = load_catalog(path, user_file=False)
    listed = [o.count for o in catalog.offers_for("a100-40gb-sxm4", provider="lab")]
    assert listed == [1, 2, 8]
