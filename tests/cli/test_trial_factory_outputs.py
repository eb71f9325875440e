"""What estimate says of a new user's own models: the input size a factory ran at (text and --json), sizes it
ignores (stderr, dropped from --json's workload), and rates too small for one decimal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuwise.units import format_samples_rate

FACTORIES = '''
import torch
from torch import nn


def seq(batch_size=2, seq_len=48):
    return nn.Linear(16, 10), (torch.empty(batch_size, seq_len, 16),)


def fixed(batch_size=2):
    return nn.Linear(16, 10), (torch.empty(batch_size, 16),)
'''


@pytest.fixture
def factories(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(FACTORIES)
    return path


def _estimate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", *args, "--optimizer", "sgd",
                           "--batch-size", "2"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GPUWISE_NO_CACHE": "1", "COLUMNS": "200"})


def test_estimate_says_and_records_the_factorys_own_seq_len(factories):
    text = _estimate(f"{factories}:seq")
    assert text.returncode == 0, text.stderr
    assert "seq(batch_size=2, seq_len=48), seq_len its own default" in text.stdout
    out = json.loads(_estimate(f"{factories}:seq", "--json").stdout)
    assert out["workload"]["seq_len"] == 48 and out["workload"]["image_size"] is None


def test_sizes_a_factory_ignores_are_said_on_stderr_and_left_out_of_the_json(factories):
    r = _estimate(f"{factories}:fixed", "--seq-len", "512", "--image-size", "64", "--json")
    assert r.returncode == 0, r.stderr
    assert "--seq-len has no effect" in r.stderr and "--image-size has no effect" in r.stderr
    workload = json.loads(r.stdout)["workload"]
    assert workload["seq_len"] is None and workload["image_size"] is None


@pytest.mark.parametrize("per_s, shown", [(0.00423, "0.0042"), (0.05, "0.050"), (12.34, "12.3"), (250.0, "250.0")])
def test_a_slow_rate_keeps_two_significant_digits(per_s, shown):
    assert format_samples_rate(per_s) == shown


def test_a_whisper_config_is_refused_in_one_line_exit_2(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "whisper", "d_model": 64, "encoder_layers": 2, "decoder_layers": 2,
                                  "architectures": ["WhisperForConditionalGeneration"]}))
    r = _estimate(f"hf:{config}")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and len(lines[0]) < 400, r.stderr
    assert "WhisperForConditionalGeneration" in lines[0] and "file.py:factory" in lines[0]
