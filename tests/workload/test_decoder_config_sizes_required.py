"""A causal LM's config.json that leaves out its hidden size or layer count is refused in one line (exit 2), never
sized by a guess. Before, the closed form refused it (``is_llm`` False) and the tracer then built it with
transformers' class defaults, LlamaConfig's 32 layers: a Llama config without ``num_hidden_layers`` was estimated
as a 32-layer model, silently, in fp32, as if it were no LLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.specs import resolve_model_spec

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
         "intermediate_size": 5632, "num_attention_heads": 16, "num_hidden_layers": 4, "vocab_size": 32000}


def _config(tmp_path, drop: str):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in LLAMA.items() if k != drop}))
    return path


@pytest.mark.parametrize("drop", ["num_hidden_layers", "hidden_size"])
def test_a_causal_lm_config_without_its_size_is_refused_naming_it(tmp_path, drop):
    with pytest.raises(WorkloadError, match=drop):
        resolve_model_spec(f"hf:{_config(tmp_path, drop)}")


def test_a_complete_causal_lm_config_still_resolves(tmp_path):
    assert resolve_model_spec(f"hf:{_config(tmp_path, 'none')}").hf_config["num_hidden_layers"] == 4


def test_the_cli_refuses_it_in_one_line_with_exit_2(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "gpuwise", "estimate", f"hf:{_config(tmp_path, 'num_hidden_layers')}",
                           "--seq-len", "128", "-b", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "num_hidden_layers" in proc.stderr
