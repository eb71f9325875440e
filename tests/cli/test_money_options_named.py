"""A bad amount of money names the option it was given to (`--budget abc` said only "not an amount of money"),
as --gpu-price and the size and duration options do: one line, exit code 2, before any trace."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("args, option", [
    (["recommend", "torchvision:resnet18", "--samples", "1000", "--budget", "abc"], "--budget"),
    (["advise", "no-such-log.csv", "--gpu-price", "abc"], "--gpu-price"),
])
def test_a_bad_amount_of_money_names_its_option(args, option, tmp_path):
    log = tmp_path / "run.csv"
    log.write_text("step,loss\n" + "".join(f"{i},{2.0 / (i + 1)}\n" for i in range(50)))
    args = [str(log) if a == "no-such-log.csv" else a for a in args]
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HOME": str(tmp_path)})
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [f"gpuwise: error: {option}: not an amount of money: 'abc' "
                                             "(examples: 300, ¥300, 300元, 25USD)"]
