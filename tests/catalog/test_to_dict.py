"""Catalog values serialise themselves, as the other results do, by the one serialiser `gpus --json` uses."""

from __future__ import annotations

import json

from gpuwise.catalog import load_catalog
from gpuwise.catalog.query import gpu_record, offer_record


def test_gpu_and_offer_to_dict_are_json_safe_and_what_gpus_json_prints():
    catalog = load_catalog()
    gpu = catalog.gpu("rtx-4090")
    offers = catalog.offers_for(gpu.id)
    assert offers
    d = gpu.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["id"] == "rtx-4090" and d["visible_memory_bytes"] == gpu.visible_memory_bytes and "offers" not in d
    record = gpu_record(gpu, offers)
    assert {k: v for k, v in record.items() if k != "offers"} == d
    assert list(record)[:6] == ["id", "name", "memory_bytes", "memory_bandwidth_gbs", "peak_tflops", "nvml_names"]
    assert list(record)[6] == "offers"
    assert record["offers"] == [o.to_dict() for o in offers] == [offer_record(o) for o in offers]
    o = offers[0].to_dict()
    assert json.loads(json.dumps(o)) == o and o["currency"] == offers[0].currency
