"""A model factory's own input sizes stand when the user gives none, and the job records the size used; a size
the factory has no parameter for is said to change nothing and left out of the job."""

from __future__ import annotations

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload
from gpuwise.workload.factory_signature import factory_input_sizes, factory_signature

FACTORIES = '''
import torch
from torch import nn


class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 10)

    def forward(self, x):
        return self.proj(x).mean(1)


def seq(batch_size=2, seq_len=48):
    return Seq(), (torch.empty(batch_size, seq_len, 16),)


def images(batch_size=2, image_size=40):
    return nn.Conv2d(3, 4, 3), (torch.empty(batch_size, 3, image_size, image_size),)


def needs_seq(batch_size, seq_len):
    return Seq(), (torch.empty(batch_size, seq_len, 16),)


def fixed(batch_size=2):
    return nn.Linear(16, 10), (torch.empty(batch_size, 16),)


def bare():
    return nn.Embedding(100, 16)
'''


@pytest.fixture
def factories(tmp_path):
    path = tmp_path / "sized.py"
    path.write_text(FACTORIES)
    return path


def _first_input_shape(trace):
    return next(op for op in trace.ops if op.phase == "forward" and op.input_shapes).input_shapes


def test_the_factorys_own_seq_len_is_traced_when_none_is_given(factories):
    trace = trace_workload(Workload(model=f"{factories}:seq", batch_size=3, optimizer="sgd"))
    assert (3, 48, 16) in _first_input_shape(trace)
    assert "factory called as seq(batch_size=3, seq_len=48), seq_len its own default" in trace.notes


def test_a_given_seq_len_still_replaces_the_factorys_default(factories):
    trace = trace_workload(Workload(model=f"{factories}:seq", batch_size=3, seq_len=20, optimizer="sgd"))
    assert (3, 20, 16) in _first_input_shape(trace)


def test_the_job_records_the_size_the_factory_runs_at(factories):
    assert Workload(model=f"{factories}:seq").with_factory_sizes().seq_len == 48
    assert Workload(model=f"{factories}:images").with_factory_sizes().image_size == 40
    assert Workload(model=f"{factories}:images", image_size=32).with_factory_sizes().image_size == 32


def test_a_size_parameter_without_default_gets_gpuwises_default_and_says_so(factories):
    assert factory_input_sizes(f"{factories}:needs_seq") == {"seq_len": 128}
    assert factory_input_sizes(f"{factories}:fixed") == {}


def test_sizes_a_factory_takes_no_parameter_for_are_said_to_change_nothing(factories):
    ignored = Workload(model=f"{factories}:fixed", seq_len=512, image_size=64).inputs_it_ignores()
    assert set(ignored) == {"seq_len", "image_size"}
    assert ignored["seq_len"].startswith("--seq-len has no effect") and "takes no seq_len parameter" in ignored["seq_len"]
    assert Workload(model=f"{factories}:seq", seq_len=512).inputs_it_ignores() == {}


def test_a_factory_that_returns_no_inputs_keeps_the_sizes_its_guessed_inputs_use(factories):
    assert factory_signature(f"{factories}:bare").returns_inputs is False
    assert Workload(model=f"{factories}:bare", seq_len=512).inputs_it_ignores() == {}
