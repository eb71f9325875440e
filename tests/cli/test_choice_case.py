"""Choice names are case-insensitive on the command line, as DESIGN.md promises: `--precision FP16` works."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# A shipped decoder config: the closed form answers in a fraction of a second, no trace.
QWEN = ["hf:Qwen/Qwen2.5-0.5B", "--seq-len", "128", "--batch-size", "1", "--json"]


def gpuwise(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("typed, meant", [("FP16", "fp16"), ("Amp-BF16", "amp-bf16"), ("bf16", "bf16")])
def test_precision_names_are_accepted_in_any_case_and_answer_as_the_lower_case_name(typed, meant):
    shouted = gpuwise("estimate", *QWEN, "--precision", typed)
    assert shouted.returncode == 0, shouted.stderr
    plain = gpuwise("estimate", *QWEN, "--precision", meant)
    got, want = json.loads(shouted.stdout), json.loads(plain.stdout)
    assert got["workload"]["precision"] == meant
    assert got["memory"] == want["memory"]


def test_an_unknown_precision_is_still_refused_with_exit_2():
    r = gpuwise("estimate", *QWEN, "--precision", "FP17")
    assert r.returncode == 2 and "fp16" in r.stderr and r.stdout == ""
