"""Providers by their names and other spellings: the option's errors say which option, a cloud the topology data
knows (Azure, Vast.ai) is never "unknown", and gpuhunt's spellings ("lambdalabs", "vastai") are the catalog's
providers, for ``--provider``, for the machines' topology and for SkyPilot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuwise.catalog import builtin_catalog
from gpuwise.catalog.live import live_offers
from gpuwise.catalog.query import select_gpus
from gpuwise.catalog.topology import provider_entry, rents_per_gpu, topology_for
from gpuwise.catalog.resolve import resolve_gpu

CATALOG = builtin_catalog()


def gpus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "gpus", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, start", [
    (["--provider", "foo"], "gpuwise: error: --provider: unknown provider 'foo'; known: aliyun, autodl"),
    (["--sort", "cost"], "gpuwise: error: --sort: unknown sort key 'cost'"),
])
def test_an_option_error_names_the_option_as_min_memory_does(args, start):
    result = gpus(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(start) and result.stderr.count("\n") == 1, result.stderr


def test_a_cloud_without_shipped_offers_is_known_and_the_line_says_where_its_prices_come_from():
    result = gpus("--provider", "Azure")
    assert result.returncode == 2 and result.stdout == ""
    line = result.stderr
    assert line.count("\n") == 1 and "unknown" not in line, line
    assert line.startswith("gpuwise: error: --provider: no offer from azure in the catalog") and "--live" in line
    assert "[[offer]]" in line and "providers with offers: aliyun, autodl" in line


def test_a_users_offer_from_a_cloud_is_found_by_gpuhunts_spelling_and_the_catalogs(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text('[[offer]]\nprovider = "vastai"\ngpu = "rtx-4090"\nprice_per_hour = 0.35\ncurrency = "USD"\n'
                    'source = "vast.ai market"\nchecked = "2026-12-01"\n')
    for asked in ("vast", "vastai", "Vast.ai"):
        result = gpus("--provider", asked, "--catalog", str(mine), "--json")
        assert result.returncode == 0, result.stderr
        # listed under the catalog's one spelling, as live offers are (test_trial5_offer_provider_spelling)
        assert '"provider": "vast"' in result.stdout and '"vastai"' not in result.stdout
        assert '"autodl"' not in result.stdout


def test_gpuhunts_lambdalabs_is_the_shipped_lambda():
    lambda_offers = {o.gpu_id for r in select_gpus(CATALOG, provider="lambda") for o in r.offers}
    assert lambda_offers
    assert {o.gpu_id for r in select_gpus(CATALOG, provider="lambdalabs") for o in r.offers} == lambda_offers
    assert provider_entry("lambdalabs")["name"] == "lambda"


def test_live_offers_are_listed_under_the_catalogs_provider_names(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    class Item:   # the fields of gpuhunt's CatalogItem that the catalog reads
        instance_name, location, spot, gpu_vendor, gpu_count, price = "gpu_1x_a10", "us-east-1", False, "nvidia", 1, 0.75

        def __init__(self, provider, gpu_name, gpu_memory):
            self.provider, self.gpu_name, self.gpu_memory = provider, gpu_name, gpu_memory

    live = live_offers(CATALOG, query=lambda: [Item("lambdalabs", "A10", 24), Item("vastai", "RTX4090", 24)],
                       version="0.1.34", now=1_800_000_000)
    assert sorted(o.provider for o in live.offers) == ["lambda", "vast"]


def test_clouds_skypilot_knows_have_their_machines_and_skypilot_name():
    a100 = resolve_gpu(CATALOG, "NVIDIA A100-SXM4-80GB")
    assert provider_entry("azure")["skypilot_cloud"] == "azure"
    azure = topology_for(a100, "azure")
    assert azure.multi_node and azure.network.kind == "infiniband"
    assert provider_entry("vastai")["skypilot_cloud"] == "vast"
    assert rents_per_gpu("vastai") and not topology_for(resolve_gpu(CATALOG, "4090"), "vast").multi_node


def test_a_variants_json_says_which_gpu_its_datasheet_comes_from(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text('[[gpu]]\nid = "rtx-4090-48gb"\nbased_on = "NVIDIA GeForce RTX 4090"\nmemory = "48GiB"\n')
    result = gpus("rtx-4090-48gb", "4090", "--catalog", str(mine), "--json")
    assert result.returncode == 0, result.stderr
    variant, base = json.loads(result.stdout)["gpus"]
    assert (variant["based_on"], base["based_on"]) == ("rtx-4090", None)
    assert variant["source"] == base["source"] and variant["verified"] is False
