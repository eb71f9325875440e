"""A price a user copies from a cloud's own page, under the name the cloud gives itself ("Google Cloud", "阿里云",
"runpod.io"), is that cloud's price: it replaces the shipped offer and ``--provider gcp`` finds it. And a cloud's
price is one region's: the offer says which, in the table and in ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from gpuwise.catalog import builtin_catalog, load_catalog
from gpuwise.catalog.live import to_offers
from gpuwise.catalog.topology import provider_entry


def _offer_file(tmp_path, provider: str, gpu: str, price: float, currency: str, extra: str = ""):
    path = tmp_path / "mine.toml"
    path.write_text(f'[[offer]]\nprovider = "{provider}"\ngpu = "{gpu}"\nprice_per_hour = {price}\n'
                    f'currency = "{currency}"\nsource = "my bill"\nchecked = "2026-12-01"\n{extra}', encoding="utf-8")
    return path


@pytest.mark.parametrize("written, provider, gpu, currency", [
    ("Google Cloud", "gcp", "t4", "USD"),
    ("Google Cloud Platform", "gcp", "t4", "USD"),
    ("Amazon Web Services", "aws", "t4", "USD"),
    ("Amazon EC2", "aws", "t4", "USD"),
    ("阿里云", "aliyun", "t4", "CNY"),
    ("runpod.io", "runpod", "rtx-4090", "USD"),
    ("autodl.com", "autodl", "rtx-4090", "CNY"),
    ("Lambda.ai", "lambda", "a10", "USD"),
])
def test_a_price_under_the_name_a_cloud_gives_itself_replaces_that_clouds_shipped_offer(
        tmp_path, written, provider, gpu, currency):
    catalog = load_catalog(_offer_file(tmp_path, written, gpu, 0.123, currency), user_file=False)
    single_on_demand = catalog.offers_for(gpu, provider=provider, spot=False)
    single_on_demand = [o for o in single_on_demand if o.count == 1]
    assert len(single_on_demand) == 1, single_on_demand
    mine = single_on_demand[0]
    assert mine.own and mine.price_per_hour == 0.123 and mine.provider == provider


def test_every_region_a_shipped_offer_names_is_its_providers_launch_region():
    # the region the topology data launches a provider's machines in (launch's `infra: cloud/region`) is the one its
    # shipped prices are for: two homes of one fact must not disagree
    for offer in builtin_catalog().offers:
        entry = provider_entry(offer.provider) or {}
        if offer.region and entry.get("region"):
            assert offer.region == entry["region"], offer


@pytest.mark.parametrize("provider", ["aws", "gcp", "aliyun"])
def test_a_clouds_shipped_prices_say_their_region(provider):
    offers = [o for o in builtin_catalog().offers if o.provider == provider]
    assert offers and all(o.region and o.region in o.source for o in offers)
    assert all(o.to_dict()["region"] == o.region for o in offers)


def test_a_marketplaces_shipped_price_names_no_region():
    offers = [o for o in builtin_catalog().offers if o.provider in ("autodl", "runpod", "lambda")]
    assert offers and all(o.region == "" and o.to_dict()["region"] is None for o in offers)


def test_a_users_offer_may_say_its_region_and_a_blank_one_is_none(tmp_path):
    catalog = load_catalog(_offer_file(tmp_path, "aws", "t4", 0.61, "USD", 'region = " eu-west-1 "\n'), user_file=False)
    mine = [o for o in catalog.offers_for("t4", provider="aws") if o.own]
    assert [o.region for o in mine] == ["eu-west-1"]
    catalog = load_catalog(_offer_file(tmp_path, "aws", "t4", 0.61, "USD", 'region = "  "\n'), user_file=False)
    assert [o.region for o in catalog.offers_for("t4", provider="aws") if o.own] == [""]


def test_live_offers_keep_the_region_gpuhunt_gives_so_two_regions_prices_are_told_apart():
    def item(location, price):
        return SimpleNamespace(provider="aws", gpu_vendor="nvidia", gpu_name="T4", gpu_memory=16, gpu_count=1,
                               price=price, spot=False, instance_name="g4dn.xlarge", location=location)
    offers, left_out = to_offers(builtin_catalog(), [item("us-east-1", 0.526), item("eu-west-1", 0.587)],
                                 checked="2026-12-07", version="0.1")
    assert left_out == 0
    assert sorted((o.region, o.price_per_hour) for o in offers) == [("eu-west-1", 0.587), ("us-east-1", 0.526)]


def test_the_offers_table_shows_each_clouds_region(tmp_path):
    path = _offer_file(tmp_path, "aws", "t4", 0.61, "USD", 'region = "eu-west-1"\n')
    result = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "gpus", "t4", "--catalog", str(path)],
                            capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("t4 ")]
    by_price = {r[3]: r for r in rows if len(r) > 3}
    # yours (replacing AWS's shipped on-demand price), and AWS's and Aliyun's shipped spot ones
    assert "eu-west-1" in by_price["$0.61"] and "us-east-1" in by_price["$0.21"] and "cn-hangzhou" in by_price["¥2.69"]
    assert "region" in result.stdout
    json_out = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "gpus", "t4", "--catalog", str(path), "--json"],
                              capture_output=True, text=True, timeout=120)
    offers = json.loads(json_out.stdout)["gpus"][0]["offers"]
    assert {(o["provider"], o["price_per_hour"], o["region"]) for o in offers} >= {
        ("aws", 0.61, "eu-west-1"), ("aws", 0.21, "us-east-1"), ("gcp", 0.54, "us-central1")}
