"""A trial of catalog files: `currency = "RMB"` (how AutoDL's prices and most Chinese users write the yuan) was
refused though gpuwise reads "300 RMB" as CNY everywhere else, and `--catalog /tmp` said "catalog file not
found" of a directory that exists."""

from __future__ import annotations

import datetime
import json

import pytest

from gpuwise.catalog import CatalogError, load_catalog
from gpuwise.units import parse_money

LAST_WEEK = datetime.date.today() - datetime.timedelta(days=7)
AUTODL_4090 = """
[[offer]]
provider = "AutoDL"
gpu = "RTX 4090"
price_per_hour = 1.78
currency = "{currency}"
source = "autodl.com market"
checked = "{checked}"
"""


def write_offer(tmp_path, currency: str):
    path = tmp_path / "mine.toml"
    path.write_text(AUTODL_4090.format(currency=currency, checked=LAST_WEEK.isoformat()))
    return path


@pytest.mark.parametrize("written", ["RMB", "rmb", " Rmb ", "yuan"])
def test_a_yuan_written_as_rmb_is_stored_as_cny_as_parse_money_reads_it(tmp_path, written):
    catalog = load_catalog(write_offer(tmp_path, written), user_file=False)
    (offer,) = [o for o in catalog.offers if o.provider == "autodl" and o.price_per_hour == 1.78]
    assert offer.currency == parse_money(f"1.78 {written.strip()}")[1] == "CNY"


def test_gpus_json_prints_an_rmb_price_as_cny(tmp_path, cli_run):
    code, out, err = cli_run("gpus", "rtx-4090", "--catalog", str(write_offer(tmp_path, "RMB")), "--json")
    assert code == 0, err
    (gpu,) = json.loads(out)["gpus"]
    mine = [o for o in gpu["offers"] if o["provider"] == "autodl" and o["price_per_hour"] == 1.78]
    assert [o["currency"] for o in mine] == ["CNY"]


def test_an_unknown_currency_is_still_refused(tmp_path):
    with pytest.raises(CatalogError, match="'XYZ' has no exchange rate"):
        load_catalog(write_offer(tmp_path, "xyz"), user_file=False)


def test_a_directory_given_as_the_catalog_is_said_to_be_one(tmp_path, cli_run):
    code, out, err = cli_run("gpus", "--catalog", str(tmp_path))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "is a directory, not a TOML file" in line and "not found" not in line
    assert str(tmp_path) in line


def test_a_missing_catalog_file_is_still_not_found(tmp_path):
    with pytest.raises(CatalogError, match="catalog file not found"):
        load_catalog(tmp_path / "nope.toml", user_file=False)


def test_recommend_takes_rmb_as_its_currency(cli_run):
    """Was: `recommend --currency RMB` refused ("no exchange rate for 'RMB'") while prices read "300 RMB" as CNY."""
    code, out, err = cli_run("recommend", "hf:Qwen/Qwen2.5-0.5B", "--seq-len", "512", "--steps", "100",
                             "--gpus", "rtx-4090", "--max-gpus", "1", "--currency", "RMB", "--json")
    assert code == 0, err
    assert json.loads(out)["ranking_currency"] == "CNY"
