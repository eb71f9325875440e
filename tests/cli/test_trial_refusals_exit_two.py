"""Refusals exit 2 with one line on stderr: a model whose loop on tensor values never ends on fake tensors (it used
to run ~45 minutes with no output), and an encoder-decoder asked to generate (--max-new-tokens on T5)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.trace.test_data_dependent_control_flow import MODELS   # Converge: a loop the answers never end


def _gpuwise(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "GPUWISE_NO_CACHE": "1", "COLUMNS": "200", **env})


def test_a_loop_that_never_ends_on_fake_tensors_is_refused_in_one_line_with_exit_2(tmp_path):
    path = tmp_path / "loop.py"
    path.write_text(MODELS)
    done = _gpuwise("estimate", f"{path}:converge", "--optimizer", "sgd", GPUWISE_TRACE_MAX_VALUE_READS="50",
                    GPUWISE_TRACE_MAX_OPS="100000")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "loop.py:11" in lines[0] and "GPUWISE_TRACE_MAX_VALUE_READS" in lines[0]


def test_generation_asked_of_t5_is_refused_with_exit_2():
    done = _gpuwise("estimate", "hf:t5-small", "--mode", "infer", "--max-new-tokens", "16", "--json")
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == ""
    assert "encoder-decoder" in done.stderr and len(done.stderr.strip().splitlines()) == 1
