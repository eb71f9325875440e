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
