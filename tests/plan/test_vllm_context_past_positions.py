"""vLLM refuses to start where its max_model_len (prompt + new tokens) is past the model's max_position_embeddings
(``_get_and_verify_max_len``, unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1), so a vLLM estimate past it is refused in one
line (exit 2) naming both lengths; HF generate runs past it, and is still estimated as asked with a note.

Before: ``estimate hf:meta-llama/Meta-Llama-3-8B --mode infer --engine vllm --seq-len 8000 --max-new-tokens 500
-b 1 --gpu l20`` exited 0, "estimated as asked", and said both "longest context that fits 8,192" and "the KV cache
holds 23 sequences of 8,500 tokens"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.errors import PlanError
from gpuwise.plan.llm import estimate_llm
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LLAMA3 = "hf:meta-llama/Meta-Llama-3-8B"
NEW_TOKENS = 500
INFER = ["estimate", LLAMA3, "--mode", "infer", "--seq-len", "8000", "--max-new-tokens", str(NEW_TOKENS),
         "--gpu", "l20"]


@pytest.fixture(scope="module")
def positions() -> int:
    return load_arch(LLAMA3).max_position_embeddings


@pytest.fixture(scope="module")
def l20():
    return load_catalog(user_file=False).gpu("l20")


def _gpuwise(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.parametrize("serving", [["--engine", "vllm", "-b", "1"], ["--request-rate", "1"]])
def test_vllm_past_the_position_table_is_refused_in_one_line_naming_both_lengths(serving, positions):
    result = _gpuwise(*INFER, *serving)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert f"{8000 + NEW_TOKENS:,} tokens (max_model_len)" in line
    assert f"past the {positions:,} vLLM derives from {LLAMA3}'s config" in line
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in line and "--engine hf" in line


def test_hf_generate_past_the_position_table_is_still_estimated_as_asked(positions):
    result = _gpuwise(*INFER, "--engine", "hf", "-b", "1", "--json")
    assert result.returncode == 0, result.stderr
    assert f"of {positions:,} (max_position_embeddings): estimated as asked" in result.stdout


def test_vllm_at_the_position_table_is_estimated_and_one_token_past_it_refused(positions, l20):
    at = Workload(LLAMA3, mode="infer", engine="vllm", seq_len=positions - NEW_TOKENS, max_new_tokens=NEW_TOKENS)
    assert estimate_llm(at, l20).inference.vllm.holds(positions)
    with pytest.raises(PlanError, match=f"{positions + 1:,} tokens"):
        estimate_llm(at.with_(seq_len=positions - NEW_TOKENS + 1), l20)
