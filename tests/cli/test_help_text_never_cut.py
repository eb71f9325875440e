"""--help shows every word of every option's help, at any terminal width: none is cut off with an ellipsis."""

from __future__ import annotations

import pytest
import typer.main

from gpuwise.cli.app import app, main

WIDTHS = (80, 100, 120, 150, 200)


def _help(command: str, width: int, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["gpus", "estimate", "recommend"])
def test_every_word_of_every_option_help_is_shown_at_every_width(command, capsys, monkeypatch):
    # before: recommend --budget's help (it named "300元", a character two cells wide) lost the end of a line
    # to an ellipsis: "(¥ is yuan, CNY… where" at 120 columns, "ranked in ye…" at 150
    params = typer.main.get_command(app).commands[command].params
    for width in WIDTHS:
        shown = set(_help(command, width, capsys, monkeypatch).replace("│", " ").split())
        for param in params:
            missing = [word for word in (param.help or "").split() if word not in shown]
            assert not missing, f"{command} --help at {width} columns cuts {param.opts[0]}: {missing}"
