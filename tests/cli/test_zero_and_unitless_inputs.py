"""From a second new user's trial: '--samples 0' and '--steps 0' were read as 'not given' by estimate (exit 0,
no epoch line), and '--deadline 12' as 12 seconds. Each is now one line on stderr and exit code 2, before any
trace."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("args, said", [
    (["estimate", "torchvision:resnet18", "--samples", "0", "--gpu", "t4"], "--samples must be positive"),
    (["estimate", "torchvision:resnet18", "--steps", "0", "--gpu", "t4"], "--steps must be positive"),
    (["recommend", "torchvision:resnet18", "--samples", "1000", "--deadline", "12"], "--deadline 12: give a unit"),
])
def test_zero_sizes_and_a_unitless_deadline_are_refused(args, said, tmp_path):
    env = {"GPUWISE_CONFIG_DIR": str(tmp_path), "GPUWISE_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 2 and r.stdout == "", r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], r.stderr


def test_a_deadline_with_its_unit_still_parses(tmp_path):
    from gpuwise.cli.recommend import _duration

    assert _duration("--deadline", "12h", ("h", "m"), "e.g. 12h") == 12 * 3600
