"""A count a cloud does not sell is not quoted as its single-GPU price × N.

A new user's trial: `recommend torchvision:resnet50 … --provider aws --gpus t4 --deadline 3h --emit skypilot` was best
on "2× T4 from aws (g4dn.xlarge) (single-GPU price × 2)" and emitted `accelerators: T4:2` on AWS, which sells g4dn
with 1, 4 or 8 T4s only: `sky launch` finds no instance. Marketplaces that rent GPUs one by one keep price × N.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan import JobSize, recommend
from gpuwise.plan.money import convert
from gpuwise.plan.offers import candidate_offers, cheapest_offer
from gpuwise.workload import Workload
from tests.plan.test_recommend import ScriptedModel, catalog, offer, small_catalog  # noqa: F401 (catalog: a fixture)


def test_a_cloud_of_fixed_instances_is_not_quoted_at_a_count_it_does_not_sell(catalog):
    cat = small_catalog(catalog, {"t4"}, [offer("t4", 0.526, "USD", provider="aws")])
    assert cheapest_offer(cat.offers, "t4", 1, "USD") is not None
    for count in (2, 4, 8):
        assert cheapest_offer(cat.offers, "t4", count, "USD") is None
    rec = recommend(ScriptedModel(Workload("scripted", batch_size=8)), cat, job=JobSize(steps=100), per_gpu_batch=True)
    assert [o.count for o in rec.options] == [1]


def test_a_marketplace_that_rents_gpus_one_by_one_is_quoted_at_its_single_price_times_the_count(catalog):
    single = offer("rtx-4090", 1.98, provider="autodl")
    cat = small_catalog(catalog, {"rtx-4090"}, [single])
    for count in (2, 4, 8):
        priced = cheapest_offer(cat.offers, "rtx-4090", count, "CNY")
        assert priced.count == count and priced.price_per_hour == pytest.approx(count * single.price_per_hour)
        assert priced.source.endswith(f"(single-GPU price × {count})")


def test_beyond_one_machine_a_cloud_rents_whole_machines_of_its_largest_instance(catalog):
    eight = offer("h100-sxm", 98.32, "USD", count=8, provider="aws")
    cat = small_catalog(catalog, {"h100-sxm"}, [offer("h100-sxm", 12.0, "USD", provider="aws"), eight])
    sixteen = cheapest_offer(cat.offers, "h100-sxm", 16, "USD")
    assert sixteen.count == 16 and sixteen.price_per_hour == pytest.approx(2 * eight.price_per_hour)
    assert "2 instances of 8 GPUs" in sixteen.source
    assert cheapest_offer(cat.offers, "h100-sxm", 12, "USD") is None       # no whole number of machines
    assert cheapest_offer(cat.offers, "h100-sxm", 4, "USD") is None        # no 4-GPU instance listed
    # a 4-GPU instance is not a whole node: two of them are not an 8-GPU machine
    four = small_catalog(catalog, {"a10g"}, [offer("a10g", 5.672, "USD", count=4, provider="aws")])
    assert cheapest_offer(four.offers, "a10g", 8, "USD") is None


def test_the_shipped_catalog_quotes_fixed_instance_clouds_only_at_the_counts_they_list():
    cat = load_catalog(user_file=False)
    for provider in ("aws", "gcp", "lambda", "aliyun"):
        offers = candidate_offers(cat, provider=provider)
        for gpu_id in {o.gpu_id for o in offers}:
            listed = {o.count for o in offers if o.gpu_id == gpu_id}
            for count in (1, 2, 4, 8):
                priced = cheapest_offer(offers, gpu_id, count, "USD")
                assert (priced is not None) == (count in listed), (provider, gpu_id, count, listed)
                assert priced is None or priced.count == count


def test_one_sellers_instance_of_that_count_does_not_hide_anothers_cheaper_per_gpu_price(catalog):
    # a new user's trial: without --provider, 8 A100s were priced at Lambda's 8-GPU instance (~¥103/h) while AutoDL
    # rents them one by one at ¥6.68 each (¥53/h); --provider autodl then gave a cheaper "best" than the whole catalog
    lambda_eight = offer("a100-80gb-sxm4", 14.32, "USD", count=8, provider="lambda")
    autodl_one = offer("a100-80gb-sxm4", 6.68, provider="autodl")
    cat = small_catalog(catalog, {"a100-80gb-sxm4"}, [lambda_eight, autodl_one])
    priced = cheapest_offer(cat.offers, "a100-80gb-sxm4", 8, "CNY")
    assert priced.provider == "autodl" and priced.price_per_hour == pytest.approx(8 * 6.68)
    # the whole catalog is never dearer than one provider of it, at every count
    for count in (1, 2, 4, 8, 16):
        whole = cheapest_offer(cat.offers, "a100-80gb-sxm4", count, "CNY")
        for seller in ("lambda", "autodl"):
            one = cheapest_offer([o for o in cat.offers if o.provider == seller], "a100-80gb-sxm4", count, "CNY")
            if one is not None:
                assert whole is not None and _cny(whole) <= _cny(one) + 1e-9


def _cny(o):
    return convert(o.price_per_hour, o.currency, "CNY")


def test_a_users_machine_of_four_is_a_whole_node_when_renting_eight(tmp_path):
    # a review: with gpus_per_node = 4 on the user's GPU, topology said 8 GPUs are "2 nodes of 4" while the offer
    # picker still wanted an instance of 8 before renting two, so recommend and launch disagreed
    path = tmp_path / "lab.toml"
    path.write_text('[[gpu]]\nid = "a6000-lab"\nbased_on = "rtx-a6000"\ngpus_per_node = 4\n\n'
                    '[[offer]]\nprovider = "mylab"\ngpu = "a6000-lab"\ncount = 4\nprice_per_hour = 10.0\n'
                    'currency = "CNY"\nsource = "lab"\nchecked = "2026-12-01"\n')
    cat = load_catalog(path, user_file=False)
    gpu = cat.gpu("a6000-lab")
    eight = cheapest_offer(cat.offers, gpu, 8, "CNY")
    assert eight is not None and eight.count == 8 and eight.price_per_hour == pytest.approx(20.0)
    assert cheapest_offer(cat.offers, gpu, 2, "CNY") is None                 # no machine of 2 is rented there
    assert cheapest_offer(cat.offers, "a6000-lab", 8, "CNY") is None         # by id alone: nodes of 8, as before
