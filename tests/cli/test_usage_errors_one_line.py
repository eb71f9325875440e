"""A bad option value, an unknown option or a missing argument is one line on stderr and exit code 2, as every
other bad input (typer drew a usage line and a boxed panel: five lines for '--cpu-workers abc')."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args", [
    ["estimate", "torchvision:resnet18", "--cpu-workers", "abc"],
    ["estimate", "torchvision:resnet18", "--num-gpus", "1.5"],
    ["estimate", "torchvision:resnet18", "--input-rate"],
    ["estimate", "torchvision:resnet18", "--bogus-option", "3"],
    ["estimate"],
    ["gpus", "--min-memory"],
])
def test_usage_errors_are_one_line_with_exit_code_2(args):
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), r.stderr
    assert "╭" not in r.stderr and "Traceback" not in r.stderr


def test_a_bare_command_still_shows_the_help():
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app"], capture_output=True, text=True, timeout=120)
    assert "Usage" in r.stdout + r.stderr and "estimate" in r.stdout + r.stderr


def test_one_line_also_after_help_loaded_typers_rich_printer_in_this_process(capsys):
    from gpuwise.cli.app import main

    for argv in (["estimate", "--help"], ["estimate", "torchvision:resnet18", "--num-gpus", "x"]):
        with pytest.raises(SystemExit):
            main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpuwise: error: Invalid value for '--num-gpus'")
