"""A price checked long ago is said where `gpus` shows it and `recommend` uses it, and recommend's JSON options
carry the day each price was checked. "Today" is injected (``catalog.model.today_date``): no test reads the clock."""

from __future__ import annotations

import datetime

import pytest

TODAY = datetime.date(2026, 12, 6)
OLD = """
[[offer]]
provider = "autodl"
gpu = "RTX 4090"
price_per_hour = 1.50
currency = "CNY"
source = "my AutoDL invoice"
checked = "2019-05-01"
"""
JOB = ["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "256", "--steps", "1000",
       "--provider", "autodl", "--gpus", "rtx-4090", "--max-gpus", "2", "--no-remedies"]


@pytest.fixture(autouse=True)
def today(monkeypatch):
    monkeypatch.setattr("gpuwise.catalog.model.today_date", lambda: TODAY, raising=False)


@pytest.fixture
def old_catalog(tmp_path):
    (tmp_path / "old.toml").write_text(OLD)
    return str(tmp_path / "old.toml")


def stale_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "checked more than 180 days ago" in line]


def test_gpus_names_an_old_price_it_shows(old_catalog, cli_run, monkeypatch):
    # before: a price of 2019 was shown like one of today
    monkeypatch.setenv("COLUMNS", "400")
    code, out, err = cli_run("gpus", "4090", "--catalog", old_catalog)
    assert code == 0, err
    (line,) = stale_lines(out)
    assert "autodl rtx-4090 (2019-05-01)" in line


def test_gpus_says_nothing_of_prices_younger_than_the_threshold(cli_run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = cli_run("gpus", "4090")
    assert code == 0 and not stale_lines(out)


def test_recommend_json_options_carry_the_checked_date_and_the_note(old_catalog, cli_json):
    # before: no option said when its price was checked
    answer = cli_json([*JOB, "--catalog", old_catalog, "--json"])
    assert answer["options"] and {o["offer_checked"] for o in answer["options"]} == {"2019-05-01"}
    assert any("autodl rtx-4090 (2019-05-01)" in n for n in answer["notes"])


def test_recommend_prints_the_note_under_its_answer(old_catalog, cli_run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, err = cli_run(*JOB, "--catalog", old_catalog)
    assert code == 0, err
    (line,) = stale_lines(out)
    assert "2019-05-01" in line
