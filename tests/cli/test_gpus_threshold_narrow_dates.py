"""At 80 columns a MIG slice's long id made the offers table too wide, and its dates wrapped ("2026-11-" / "20") and
its amounts too ("¥120.0" / "0", read as ¥120.0): dates and amounts are read whole, at any width the table fits."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_mig_slice_offer import OFFER, SLICE    # a slice's price in a catalog file

OFFERS = OFFER + """
[[offer]]
provider = "lab"
gpu = "{gpu}"
price_per_hour = 0.5
currency = "CNY"
spot = true
source = "our MIG partition's charge-back, preemptible"
checked = "2026-11-02"
"""


@pytest.mark.parametrize("columns", [80, 70])
def test_offer_dates_and_amounts_never_wrap_beside_a_mig_id(tmp_path, cli_run, monkeypatch, columns):
    path = tmp_path / "mig.toml"
    path.write_text(OFFERS.format(gpu=SLICE))
    args = ("gpus", SLICE, "a100-40gb-sxm4", "--catalog", str(path))
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = cli_run(*args)
    assert code == 0, err
    code, listed, err = cli_run(*args, "--json")
    offers = [(gpu["id"], o) for gpu in json.loads(listed)["gpus"] for o in gpu["offers"]]
    table = out[out.index("offers ("):out.index("GiB: ")]
    rows = [line for line in table.splitlines() if line.split() and line.split()[0] in (SLICE, "a100-40gb-sxm4")]
    assert len(rows) == len(offers), table
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
    for row, (gpu_id, offer) in zip(rows, offers):
        cells = row.split()
        assert cells[0] == gpu_id and offer["checked"] in cells, table
        assert any(c.endswith(f"{offer['price_per_gpu_hour']:,.2f}") for c in cells), table
