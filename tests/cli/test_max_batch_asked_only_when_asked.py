"""`estimate --max-batch` says "(asked: N)" only where a --batch-size was given (a newcomer's trial: without one it
printed "Largest batch that fits rtx-4090: 305 (asked: 32)", the default batch, which nobody asked)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from gpuwise.cli.app import app


def _largest_line(*args: str) -> str:
    result = CliRunner().invoke(app, ["estimate", "torchvision:resnet18", "--gpu", "rtx-4090", "--max-batch", *args])
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("Largest batch that fits")]
    return line


def test_no_batch_given_no_batch_asked():
    assert re.fullmatch(r"Largest batch that fits rtx-4090: \d+", _largest_line().strip())


def test_a_given_batch_is_said_as_asked():
    assert _largest_line("--batch-size", "8").strip().endswith("(asked: 8)")
