"""``--json``'s ``launch.emit`` names what ``launch.text`` is: ``--emit skypilot`` for a provider SkyPilot does not
know (AutoDL) prints torchrun lines, and ``launch.emit`` said "skypilot", so a script that hands the text to
``sky launch`` where it says skypilot got shell lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
JOB = ("hf:Qwen/Qwen2.5-0.5B", "--seq-len", "512", "--steps", "100", "--gpus", "rtx-4090")


def _launch(provider: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", *JOB, "--provider", provider,
                          "--emit", "skypilot", "--command", "python train.py", "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["launch"]


def test_skypilot_asked_of_autodl_is_said_to_be_the_torchrun_lines_it_printed():
    launch = _launch("autodl")
    assert launch["emit"] == "torchrun"
    assert "python -m gpuwise.guard.torchrun --standalone" in launch["text"]
    assert "\nresources:" not in launch["text"] and "\nrun:" not in launch["text"]     # no task


def test_skypilot_of_a_provider_skypilot_knows_stays_a_skypilot_task():
    launch = _launch("runpod")
    assert launch["emit"] == "skypilot"
    assert yaml.safe_load(launch["text"])["resources"]["accelerators"] == "RTX4090:1"
