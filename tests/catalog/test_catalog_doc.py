"""docs/catalog.md shows what `gpuwise gpus` prints: its tables' memory is the driver's (visible) memory, and the
custom-catalog example's prices are those the offer picker gives for the example file the page shows."""

from __future__ import annotations

import re
from pathlib import Path

from gpuwise.catalog import load_catalog
from gpuwise.catalog.query import select_gpus
from gpuwise.cli.gpus import _gib
from gpuwise.plan.offers import cheapest_to_rent_one, offers_as_priced
from gpuwise.units import format_money

DOC = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"
BLOCK = re.compile(r"```(?:console)?\n(\$ gpuwise gpus[^\n]*)\n(.*?)```", re.S)
GPU_ROW = re.compile(r"^ (?P<id>[a-z0-9-]+)\*?\s+(?P<gib>[\d.]+)\s+\d+\s+[\d.]+\s+[\d.-]+\s+[\d.]+\s+[\d.-]+\s+"
                     r"(?P<from>.*?)\s*$", re.M)
EXAMPLE = "$ gpuwise gpus 4090 titan-rtx rtx-4090-48gb a100-80gb --catalog my-catalog.toml"


def blocks() -> dict[str, str]:
    return dict(BLOCK.findall(DOC.read_text()))


def example_catalog(tmp_path):
    text = DOC.read_text()
    (toml,) = [b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "titan-rtx" in b]
    (tmp_path / "my-catalog.toml").write_text(toml)
    return load_catalog(tmp_path / "my-catalog.toml")


def test_every_gpus_table_in_the_page_shows_the_memory_the_driver_reports():
    # the defect: a2 16, a10g 24, a40/l20/l40 48 GiB on the page; the command prints 15, 22.5 and 45
    catalog = load_catalog(user_file=False)
    rows = [m for cmd, body in blocks().items() if "my-catalog" not in cmd for m in GPU_ROW.finditer(body)]
    assert len(rows) > 48
    wrong = {m["id"]: m["gib"] for m in rows if m["gib"] != _gib(catalog.gpu(m["id"]).visible_memory_bytes)}
    assert not wrong, wrong


def test_the_custom_catalog_example_shows_the_prices_the_picker_gives(tmp_path):
    # the defect: the a100-80gb row's "from" price was the lab-cluster's ¥5.00 spot offer; gpus shows ¥6.68 (on-demand)
    catalog = example_catalog(tmp_path)
    body = blocks()[EXAMPLE]
    rows = select_gpus(catalog, ["4090", "titan-rtx", "rtx-4090-48gb", "a100-80gb"])
    _, cheapest = cheapest_to_rent_one({r.gpu.id: r.offers for r in rows})
    shown = {m["id"]: m["from"] for m in GPU_ROW.finditer(body)}
    expected = {gpu: f"{format_money(o.price_per_gpu_hour, o.currency)} {o.provider}" if o else "-"
                for gpu, o in cheapest.items()}
    assert shown == expected
    # and the offers listed are those that apply: your ¥1.78 a card at autodl for 2, 4 and 8 RTX 4090s too
    (rtx,) = [r for r in rows if r.gpu.id == "rtx-4090"]
    for o in offers_as_priced(rtx.offers):
        line = f"rtx-4090 {o.provider} {o.count} {format_money(o.price_per_hour, o.currency)}"
        assert line in " ".join(body.split()), line
