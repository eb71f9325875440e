"""A repeated estimate answers from the trace cache without importing torch (~2 s here): the step time's
input-pipeline check asks the model spec for its image side, which must not build the model to say it."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import sys
from gpuwise.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print("torch imported" if "torch" in sys.modules else "no torch")
"""


def test_a_cached_estimate_does_not_import_torch(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GPUWISE_NO_CACHE"}    # the suite turns the cache off
    env.update(GPUWISE_CACHE_DIR=str(tmp_path), COLUMNS="120")
    args = ["estimate", "torchvision:resnet18", "--batch-size", "8", "--gpu", "rtx-4090"]
    first = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr
    assert "Step time" in again.stdout and again.stdout.strip().endswith("no torch"), again.stdout[-500:]


def test_a_closed_form_llm_estimate_imports_neither_torch_nor_transformers(tmp_path):
    # a complete config asks transformers for no default: every Llama estimate had imported transformers and torch
    # (3.3 s) because the MoE fields a dense config never has counted as missing
    env = {**os.environ, "GPUWISE_CACHE_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "COLUMNS": "120"}
    probe = PROBE.replace('print("torch imported" if "torch" in sys.modules else "no torch")',
                          'print(sorted(m for m in ("torch", "transformers") if m in sys.modules))')
    args = ["estimate", "hf:meta-llama/Llama-3.1-8B", "--mode", "infer", "--seq-len", "1024", "--gpu", "h100-sxm"]
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("[]"), done.stdout[-500:]
