"""A price of the user's own is the price at every count, and the table says which prices are theirs."""

from __future__ import annotations

import pytest

from gpuwise.cli.app import main

OWN = """
[[offer]]
provider = "autodl"
gpu = "RTX 4090"
count = 1
price_per_hour = 1.50
currency = "CNY"
source = "my AutoDL invoice"
checked = "2026-12-01"
"""
JOB = ["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "256", "--steps", "1000",
       "--provider", "autodl", "--gpus", "rtx-4090", "--no-remedies"]


@pytest.fixture
def own_catalog(tmp_path, monkeypatch):
    (tmp_path / "catalog.toml").write_text(OWN)
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(tmp_path))


def test_your_single_gpu_price_prices_two_four_and_eight_cards_too(own_catalog, cli_json):
    # before: 1 x RTX 4090 at your ¥1.50, but 2x/4x/8x at the shipped ¥1.98 a card
    options = cli_json([*JOB, "--json"])["options"]
    counts = {o["count"] for o in options}
    assert {1, 2, 4, 8} <= counts
    for o in options:
        assert o["price_per_hour"] == pytest.approx(1.50 * o["count"]) and o["own_price"] is True, o


def test_the_table_marks_your_prices(own_catalog, capsys):
    with pytest.raises(SystemExit):
        main(JOB)
    out = capsys.readouterr().out
    assert "autodl*" in out and "* your price" in out


def test_shipped_prices_are_not_marked(cli_json, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(tmp_path))
    options = cli_json([*JOB, "--json"])["options"]
    assert not any(o["own_price"] for o in options)
    assert all(o["price_per_hour"] / o["count"] == pytest.approx(1.98) for o in options)


# --- your single-GPU price competes at every count, with every provider's offers -------------------------------

def _catalog_with_own_price(tmp_path):
    from gpuwise.catalog import load_catalog

    (tmp_path / "mine.toml").write_text(OWN)
    return load_catalog(tmp_path / "mine.toml", user_file=False)


def test_your_single_gpu_price_x_count_beats_a_dearer_exact_offer_elsewhere(tmp_path):
    # the defect: runpod's shipped 2x offer ($1.38/h) was taken before your ¥1.50 x 2 was built
    from gpuwise.plan.offers import candidate_offers, cheapest_offer

    offers = candidate_offers(_catalog_with_own_price(tmp_path), gpu_ids=["rtx-4090"])
    assert any(o.provider == "runpod" and o.count == 2 for o in offers)
    for count in (2, 4, 8):
        best = cheapest_offer(offers, "rtx-4090", count, "CNY")
        assert (best.provider, best.count, best.indicative) == ("autodl", count, False), best
        assert best.price_per_hour == pytest.approx(1.50 * count)
        assert best.source.endswith(f"(single-GPU price × {count})")


def test_a_cheaper_exact_offer_elsewhere_still_wins_and_your_own_count_price_is_kept(tmp_path):
    from gpuwise.catalog.model import Offer
    from gpuwise.plan.offers import cheapest_offer

    own = Offer("autodl", "rtx-4090", 1, 1.50, "CNY", False, "mine", "2026-12-01", indicative=False)
    own_pair = Offer("autodl", "rtx-4090", 2, 3.20, "CNY", False, "mine", "2026-12-01", indicative=False)
    cheap = Offer("elsewhere", "rtx-4090", 2, 2.50, "CNY", False, "shipped", "2026-11-20")
    assert cheapest_offer([own, cheap], "rtx-4090", 2, "CNY") is cheap
    # your own price for 2 is your word for 2: not undercut by your single-GPU price x 2
    assert cheapest_offer([own, own_pair], "rtx-4090", 2, "CNY") is own_pair


def test_recommend_without_provider_quotes_every_count_at_your_price(own_catalog, cli_json):
    options = cli_json([*[a for a in JOB if a not in ("--provider", "autodl")], "--json"])["options"]
    by_count = {o["count"]: o for o in options if o["provider"] == "autodl"}
    assert {1, 2, 4, 8} <= set(by_count)
    two = [o for o in options if o["count"] == 2]
    assert len(two) == 1 and two[0]["provider"] == "autodl" and two[0]["own_price"], two


def test_gpus_lists_your_price_where_it_applies_not_the_shipped_multi_gpu_prices(tmp_path, cli_json):
    (tmp_path / "mine.toml").write_text(OWN)
    (gpu,) = cli_json(["gpus", "4090", "--catalog", str(tmp_path / "mine.toml"), "--json"])["gpus"]
    autodl = [(o["count"], o["price_per_hour"], o["indicative"]) for o in gpu["offers"] if o["provider"] == "autodl"]
    assert autodl == [(1, 1.5, False), (2, 3.0, False), (4, 6.0, False), (8, 12.0, False)]
    assert any(o["provider"] == "runpod" and o["indicative"] for o in gpu["offers"])


# --- your price under another spelling of the provider ("AutoDL") is still that provider's price ---------------

def test_your_price_spelt_autodl_in_capitals_replaces_the_shipped_autodl_prices_at_every_count(tmp_path, cli_json):
    # the defect: own_prices_* keyed on (provider, spot) as written: "AutoDL" left the shipped "autodl" 2/4/8 prices
    from gpuwise.catalog import load_catalog
    from gpuwise.plan.offers import candidate_offers, cheapest_offer

    mine = tmp_path / "mine.toml"
    mine.write_text(OWN.replace('provider = "autodl"', 'provider = "AutoDL"'))
    offers = candidate_offers(load_catalog(mine, user_file=False), provider="autodl", gpu_ids=["rtx-4090"])
    for count in (1, 2, 4, 8):
        best = cheapest_offer(offers, "rtx-4090", count, "CNY")
        assert (best.count, best.indicative) == (count, False) and best.price_per_hour == pytest.approx(1.50 * count)
    (gpu,) = cli_json(["gpus", "4090", "--catalog", str(mine), "--json"])["gpus"]
    autodl = [(o["count"], o["price_per_hour"], o["indicative"]) for o in gpu["offers"]
              if o["provider"].lower() == "autodl"]
    assert autodl == [(1, 1.5, False), (2, 3.0, False), (4, 6.0, False), (8, 12.0, False)]
