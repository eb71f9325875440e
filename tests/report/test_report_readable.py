"""The report says what it leaves out, draws what its table lists, and writes money a person can read."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.axes
import pytest

from gpuwise.report.build import build_report
from gpuwise.report.html import MAX_BARS, render_html
from gpuwise.report.text import MAX_ROWS
from gpuwise.units import format_money

from tests.report.helpers import text_of

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"


@pytest.fixture(scope="module")
def seed_report(catalog):
    return build_report(SEED, catalog, gpu_price=(15.0, "CNY"))


def test_the_text_says_how_many_cheaper_gpus_it_did_not_list(seed_report):
    # the defect: "15 cheaper GPU(s) would have held this job" above a table of 10, no "more" hint
    text = text_of(seed_report)
    cheaper = len(seed_report.right_sizing.cheaper)
    assert cheaper > MAX_ROWS
    assert f"{cheaper} cheaper GPU(s) would have held this job" in text
    assert f"{cheaper - MAX_ROWS} more cheaper GPU(s) not shown" in text


def test_the_html_chart_draws_the_first_gpus_its_table_lists_and_says_so(seed_report, monkeypatch):
    # the defect: the chart stopped at 14 GPUs while the table listed 20. The table now lists every GPU that
    # holds the job (the T4 was left out at 20); the chart draws the table's first MAX_BARS and the rented one.
    drawn = []
    barh = matplotlib.axes.Axes.barh

    def recording_barh(self, y, width, *args, **kwargs):
        drawn.extend(y)
        return barh(self, y, width, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "barh", recording_barh)
    page = render_html(seed_report)
    table = re.findall(r"<tr class='[a-z]*'><td>([^<]+?)(?: \(rented\))?</td>", page)
    assert len(table) > MAX_BARS + 1
    rented = seed_report.right_sizing.rented_gpu_name
    assert sorted(drawn) == sorted(table[:MAX_BARS] + ([rented] if rented not in table[:MAX_BARS] else []))
    assert f"the {MAX_BARS} cheapest for the work of the {len(table)} the table lists" in page


@pytest.mark.parametrize(("amount", "currency", "text"), [
    (-0.2, "CNY", "-¥0.20"), (0.2, "CNY", "¥0.20"), (-1234.5, "USD", "-$1,234.50"), (-0.001, "CNY", "¥0.00"),
    (-3.0, "GBP", "-£3.00"),
])
def test_negative_money_puts_the_sign_before_the_symbol(amount, currency, text):
    assert format_money(amount, currency) == text
