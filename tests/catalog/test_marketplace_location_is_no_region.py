"""A marketplace's location is a host or a data centre (RunPod's ``CA-MTL-1`` is SkyPilot's zone, not a region):
a live offer there names no region, and no launch takes one for its task's region; a cloud's live offer keeps its
region, and a launch there goes to it."""

from __future__ import annotations

from types import SimpleNamespace

from gpuwise.catalog import builtin_catalog
from gpuwise.catalog.live import to_offers
from gpuwise.catalog.topology import provider_entry
from gpuwise.launch import plan_launch


def _live(provider: str, location: str, gpu_name: str = "RTX4090", memory_gib: int = 24):
    item = SimpleNamespace(provider=provider, gpu_vendor="nvidia", gpu_name=gpu_name, gpu_memory=memory_gib,
                           gpu_count=1, price=0.69, spot=False, instance_name="", location=location)
    (offer,), _ = to_offers(builtin_catalog(), [item], checked="2026-12-07", version="0.1")
    return offer


def test_a_marketplaces_location_is_no_region():
    assert _live("runpod", "CA-MTL-1").region == ""


def test_a_cloud_offer_of_another_region_launches_there_a_marketplace_one_at_the_providers():
    cat = builtin_catalog()
    cloud = _live("aws", "eu-west-1", "T4", 16)
    plan = plan_launch(SimpleNamespace(count=1, provider="aws", spot=False, offer=cloud), cat.gpu("t4"), "python x.py")
    assert plan.region == "eu-west-1"
    market = _live("runpod", "CA-MTL-1")
    tagged = SimpleNamespace(count=1, provider="runpod", spot=False, offer=SimpleNamespace(region="CA-MTL-1"))
    plan = plan_launch(tagged, cat.gpu(market.gpu_id), "python x.py")
    assert plan.region == (provider_entry("runpod") or {}).get("region")


def test_gpus_refuses_a_provider_list_in_the_one_line_recommend_gives(cli_run):
    """`gpus --provider runpod,aws` said "unknown provider 'runpod,aws' (did you mean: runpod?)" while recommend and
    advise refused the list as such: one rule, the catalog's."""
    code, _, err = cli_run("gpus", "--provider", "runpod,aws")
    assert code == 2 and "one provider, not a list: 'runpod,aws'" in err and "did you mean" not in err


def test_recommend_json_names_the_region_of_each_options_price(cli_json):
    out = cli_json(["recommend", "torchvision:resnet18", "--batch-size", "32", "--steps", "100", "--gpus", "t4",
                    "--provider", "aws", "--max-gpus", "1", "--no-remedies", "--json"])
    (option,) = [o for o in out["options"] if not o["spot"]]
    assert option["offer_region"] == provider_entry("aws")["region"]
