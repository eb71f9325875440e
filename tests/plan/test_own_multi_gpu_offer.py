"""A user's offer for several GPUs replaces only the shipped offer of that very count (docs/catalog.md: same
provider, GPU, count and spot-ness); a user's single-GPU price keeps pricing every count."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.offers import cheapest_offer, offers_as_priced

TWO = """
[[offer]]
provider = "autodl"
gpu = "rtx-4090"
count = 2
price_per_hour = 3.0
currency = "CNY"
source = "my invoice"
checked = "2026-12-01"
"""
ONE = TWO.replace("count = 2", "count = 1").replace("3.0", "1.5")


def catalog_with(tmp_path, text):
    (tmp_path / "c.toml").write_text(text)
    return load_catalog(tmp_path / "c.toml", user_file=False)


def autodl_4090(catalog):
    return [o for o in catalog.offers if o.provider == "autodl" and o.gpu_id == "rtx-4090"]


def test_a_two_gpu_offer_of_yours_leaves_the_shipped_one_four_and_eight_gpu_offers(tmp_path):
    # before: the shipped 1x, 4x and 8x autodl RTX 4090 offers were dropped (`gpus` showed "-", recommend only x2)
    offers = autodl_4090(catalog_with(tmp_path, TWO))
    listed = {(o.count, o.price_per_hour, not o.indicative) for o in offers_as_priced(offers)}
    assert listed == {(2, 3.0, True), (1, 1.98, False), (4, 7.92, False), (8, 15.84, False)}
    priced = {n: cheapest_offer(offers, "rtx-4090", n, "CNY") for n in (1, 2, 4, 8)}
    assert not priced[2].indicative and priced[2].price_per_hour == 3.0
    assert {n: (not o.indicative, o.price_per_hour) for n, o in priced.items() if n != 2} == {
        1: (False, 1.98), 4: (False, 7.92), 8: (False, 15.84)}


def test_a_single_gpu_offer_of_yours_still_prices_every_count(tmp_path):
    offers = autodl_4090(catalog_with(tmp_path, ONE))
    listed = {(o.count, o.price_per_hour) for o in offers_as_priced(offers)}
    assert listed == {(1, 1.5), (2, 3.0), (4, 6.0), (8, 12.0)}
    assert all(not o.indicative for o in offers_as_priced(offers))
    for n in (1, 2, 4, 8):
        assert cheapest_offer(offers, "rtx-4090", n, "CNY").price_per_hour == pytest.approx(1.5 * n)


def test_gpus_shows_the_shipped_single_gpu_price_beside_your_two_gpu_offer(tmp_path, cli_run):
    (tmp_path / "c2.toml").write_text(TWO)
    code, out, err = cli_run("gpus", "4090", "--provider", "autodl", "--catalog", str(tmp_path / "c2.toml"))
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith(" rtx-4090") and "1008" in line)
    assert "¥1.98 autodl" in row
    for n in ("1", "4", "8"):
        assert any(line.split()[:3] == ["rtx-4090", "autodl", n] for line in out.splitlines()), n
