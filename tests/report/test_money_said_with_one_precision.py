"""The right-sizing table rounded amounts from 100 up to whole units and kept cents below: its save/month column
read `¥9,882` beside `¥0.00`, and the verdict under it said the same saving as `¥9,881.61 per month`. Every amount
of the report is now said by the one money rule (``format_money``), so a saving reads the same in the table and
in the verdict; the table still fits 80 columns."""

from __future__ import annotations

import re
from pathlib import Path

from gpuwise.report.build import build_report
from gpuwise.report.text import rows_shown
from gpuwise.units import format_money

from tests.report.helpers import one_line, text_of

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"
COLUMNS = ("price/h", "work/h", "save/h", "save/month", "save/run")


def _money_cells(text: str, gpu_ids: list[str]) -> dict[str, dict[str, str]]:
    """The table's money cells of each GPU of ``gpu_ids`` (its row: the id, GiB, time×, then the money columns)."""
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.split()[:1] and line.split()[0] in gpu_ids}
    return {gpu: dict(zip(COLUMNS, cells[-len(COLUMNS):])) for gpu, cells in rows.items()}


def test_the_table_and_the_verdict_say_each_saving_with_one_precision(catalog):
    report = build_report(SEED, catalog, gpu_price=(15.0, "CNY"))
    r = report.right_sizing
    text = text_of(report, width=80)
    shown = rows_shown(r)
    cells = _money_cells(text, [o.gpu_id for o in shown])
    assert len(cells) == len(shown) >= 2 and all(len(c) == len(COLUMNS) for c in cells.values())   # at 80 columns, every column
    for o in shown:
        assert cells[o.gpu_id] == {"price/h": format_money(o.price_per_hour_all_gpus, "CNY"),
                                   "work/h": format_money(o.cost_per_job_hour, "CNY"),
                                   "save/h": format_money(o.saving_per_hour, "CNY"),
                                   "save/month": format_money(o.saving_per_month, "CNY"),
                                   "save/run": format_money(o.saving_for_run, "CNY")}
    assert len({re.sub(r"[\d,]", "9", c)[-3:] for row in cells.values() for c in row.values()}) == 1   # all .99
    best = cells[r.cheaper[0].gpu_id]
    assert f"saves {best['save/h']}/h, {best['save/month']} per month (730 h), {best['save/run']} on this run" \
        in one_line(text)
