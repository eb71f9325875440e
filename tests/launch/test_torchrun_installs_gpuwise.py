"""Emitted torchrun lines run ``python -m gpuwise.guard.torchrun``: on a fresh machine gpuwise is not there (a new
user's trial: No module named gpuwise). Each node's block first installs the wheel of this gpuwise copied beside the
command, and stops with one clear line where it cannot."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.launch import plan_launch, render
from gpuwise.launch.wheel import build_wheel


@pytest.fixture(scope="module")
def plan():
    cat = load_catalog(user_file=False)
    # AutoDL: SkyPilot does not know it, so --emit skypilot falls back to these same lines
    return plan_launch(SimpleNamespace(count=2, provider="autodl", spot=False), cat.gpu("rtx-4090"),
                       "python train.py")


def _fresh_node(tmp_path: Path) -> dict:
    """A PATH whose python has no gpuwise (a fresh machine) and whose pip cannot install anything (no index on a fresh node)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'gpuwise'\" >&2\nexit 1\n")
    python.chmod(0o755)
    pip = bin_dir / "pip"
    pip.write_text("#!/bin/sh\necho \"ERROR: Could not find $2\" >&2\nexit 1\n")
    pip.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


@pytest.mark.parametrize("emit", ["torchrun", "skypilot"])
def test_a_node_without_gpuwise_stops_before_torchrun_saying_how_to_install_it(plan, tmp_path, emit):
    wheel = build_wheel(tmp_path / "wheels")
    text = render(plan, emit, wheel=wheel)
    assert f"copy {wheel}" in text
    block = text.split("# node 0\n", 1)[1]
    # the block up to torchrun: the install line, then the exports; a marker stands for the launch
    script = block.split("until ", 1)[0] + "echo LAUNCHED\n"
    run = subprocess.run(["/bin/bash", "-c", script], cwd=tmp_path, env=_fresh_node(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "LAUNCHED" not in run.stdout
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: gpuwise is not installed on this node") and wheel.name in last


def test_the_install_line_comes_before_the_launcher_on_every_node(plan, tmp_path):
    wheel = build_wheel(tmp_path / "wheels")
    text = render(plan, "torchrun", wheel=wheel)
    for block in text.split("# node ")[1:]:
        lines = block.splitlines()
        install = next(i for i, line in enumerate(lines) if "import gpuwise" in line)
        launch = next(i for i, line in enumerate(lines) if "gpuwise.guard.torchrun" in line)
        assert install < launch and f"pip install ./{wheel.name}" in lines[install]
