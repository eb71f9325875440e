"""--help shows a command's own options first and the ~26 shared workload options in their own panels."""

from __future__ import annotations

import pytest

from gpuwise.cli.app import main
from gpuwise.cli.workload_options import WORKLOAD_OPTIONS, WORKLOAD_PANELS


def _help(command: str, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command, own", [("report", "--html"), ("report", "--gpu-price"), ("advise", "--gpu-price"),
                                          ("run", "--log"), ("recommend", "--deadline"), ("estimate", "--gpu")])
def test_the_command_s_own_options_come_before_the_workload_panels(command, own, capsys, monkeypatch):
    # before: `report --html`, `advise --price-per-hour` and `run --log` sat under ~26 workload options
    text = _help(command, capsys, monkeypatch)
    first_panel = text.index("─ Workload: ")
    assert f"│ {own} " in text[:first_panel]
    assert "│ --batch-size " in text[first_panel:] and "│ --batch-size " not in text[:first_panel]


def test_every_workload_option_has_a_panel():
    assert set(WORKLOAD_PANELS) == set(WORKLOAD_OPTIONS)
