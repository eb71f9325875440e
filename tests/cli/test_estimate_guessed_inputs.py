"""estimate on a model file whose factory returns no example inputs: the side its guessed images were made at is
the job's in --json, a --image-size its guessed features do not take is said (a note) and left out of --json's
workload, and a forward that cannot take the guess exits 2 with one line saying what was guessed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

MODELS = '''
import torch
from torch import nn


class DictIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, batch):
        return self.fc(batch["x"])


def make_dict():
    return DictIn()


def make_mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def make_vit():
    return nn.Sequential(nn.Conv2d(3, 8, 16, stride=16), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
'''


@pytest.fixture
def models(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def _estimate(folder, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", *args, "--optimizer", "sgd",
                           "--batch-size", "2"], capture_output=True, text=True, timeout=300, cwd=folder,
                          env={**os.environ, "GPUWISE_NO_CACHE": "1", "COLUMNS": "200"})


def test_json_records_the_side_guessed_images_were_made_at(models):
    r = _estimate(models, "models.py:make_vit", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["workload"]["image_size"] == 224
    assert "factory gave no inputs: guessed (2, 3, 224, 224) float32 from its first layer (Conv2d)" in out["trace"]["notes"]


def test_an_image_size_guessed_features_ignore_is_said_and_left_out_of_the_json(models):
    r = _estimate(models, "models.py:make_mlp", "--image-size", "64", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert any(n.startswith("--image-size has no effect: make_mlp takes no image_size parameter")
               for n in out["trace"]["notes"])
    assert out["workload"]["image_size"] is None


def test_a_forward_that_cannot_take_the_guessed_input_exits_2_saying_it_was_guessed(models):
    r = _estimate(models, "models.py:make_dict")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: tracing models.py:make_dict failed"), r.stderr
    assert "gpuwise guessed its input as (2, 16) float32 from its first layer (Linear)" in lines[0]
    assert "return (module, example_inputs) from the factory to give real ones" in lines[0]
