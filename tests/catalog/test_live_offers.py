"""Live offers through gpuhunt (the query faked: tests never use the network).

gpuhunt is not installed for the tests: its wheel ships a top-level ``tests`` package that shadows this
repository's. Its items are stood in for by the fields of its ``CatalogItem`` (gpuhunt 0.1.34,
``gpuhunt/_internal/models.py``) and its vendor enum's values.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

import pytest

from gpuwise.catalog import builtin_catalog
from gpuwise.catalog.live import cache_path, live_offers, with_live_offers

CATALOG = builtin_catalog()


class AcceleratorVendor(enum.Enum):
    NVIDIA = "nvidia"
    AMD = "amd"


@dataclass(frozen=True)
class CatalogItem:
    provider: str
    instance_name: str
    location: str
    price: float
    cpu: int
    memory: float
    gpu_count: int
    gpu_name: str | None
    gpu_memory: float | None
    spot: bool
    disk_size: float | None
    gpu_vendor: AcceleratorVendor | None = None


def _item(gpu, memory, count, price, *, provider="runpod", spot=False, vendor=AcceleratorVendor.NVIDIA):
    return CatalogItem(provider=provider, instance_name=f"{count}x{gpu}", location="eu", price=price, cpu=8,
                       memory=64, gpu_count=count, gpu_name=gpu, gpu_memory=memory, spot=spot, disk_size=100,
                       gpu_vendor=vendor)


ITEMS = [_item("RTX4090", 24, 1, 0.69), _item("A100", 80, 8, 14.0, provider="lambdalabs"),
         _item("L40S", 48, 2, 1.8, spot=True), _item("H100", None, 1, 2.4),  # no memory given: SXM, PCIe or NVL?
         _item("MI300X", 192, 1, 3.0, vendor=AcceleratorVendor.AMD)]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_gpuhunt_items_become_dated_usd_offers_of_catalog_gpus():
    live = live_offers(CATALOG, query=lambda: ITEMS, version="0.1.34", now=1_800_000_000)
    got = {(o.gpu_id, o.count, o.price_per_hour, o.spot) for o in live.offers}
    assert got == {("rtx-4090", 1, 0.69, False), ("a100-80gb-sxm4", 8, 14.0, False), ("l40s", 2, 1.8, True)}
    assert live.left_out == 2 and not live.from_cache
    assert all(o.currency == "USD" and o.live and not o.indicative and o.checked == "2027-01-15"
               and o.source.startswith("gpuhunt 0.1.34: ") for o in live.offers)
    merged = with_live_offers(CATALOG, live)
    assert len(merged.offers) == len(CATALOG.offers) + 3


def test_a_fresh_cache_is_reused_and_a_failed_fetch_falls_back_to_it_saying_so():
    live_offers(CATALOG, query=lambda: ITEMS, version="0.1.34", now=1_800_000_000)
    assert json.loads(cache_path().read_text())["fetched_at"] == 1_800_000_000

    def offline():
        raise ConnectionError("no route to host")

    again = live_offers(CATALOG, query=offline, now=1_800_000_000 + 3600)      # within 6 h: not fetched
    assert again.from_cache and not again.note and len(again.offers) == 3
    stale = live_offers(CATALOG, query=offline, now=1_800_000_000 + 7 * 3600)
    assert len(stale.offers) == 3 and "could not be fetched (ConnectionError: no route to host)" in stale.note
    assert "using those fetched 2027-01-15" in stale.note


def test_offline_without_a_cache_uses_the_shipped_offers_alone():
    def offline():
        raise TimeoutError("timed out")

    live = live_offers(CATALOG, query=offline, now=1_800_000_000)
    assert live.offers == () and "only the shipped and your offers are used" in live.note
    assert with_live_offers(CATALOG, live).offers == CATALOG.offers


def test_gpus_live_lists_the_live_offer_and_marks_it_live_not_yours(monkeypatch, cli_json):
    import gpuwise.catalog.live as live_module

    monkeypatch.setattr(live_module, "_default_query", lambda: ((lambda: ITEMS), "0.1.34"))
    out = cli_json(["gpus", "rtx-4090", "--live", "--json"])
    (gpu,) = out["gpus"]
    (runpod,) = [o for o in gpu["offers"] if o["provider"] == "runpod" and o["source"].startswith("gpuhunt")]
    assert runpod["live"] is True and runpod["price_per_hour"] == 0.69 and runpod["currency"] == "USD"
    rec = cli_json(["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "128", "--steps", "100",
                    "--gpus", "rtx-4090", "--provider", "runpod", "--max-gpus", "1", "--no-remedies", "--live",
                    "--json"])
    assert rec["best"]["price_per_hour"] == 0.69 and rec["best"]["own_price"] is False
