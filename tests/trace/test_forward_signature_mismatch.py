"""A forward that cannot take the inputs it is given (too few, a keyword it has no parameter for) is the
user's input to fix, said in one line with forward's parameters and what to do: not a failure of tracing."""

from __future__ import annotations

import pytest

from gpuwise.trace import TraceError, trace_workload
from gpuwise.workload import Workload, WorkloadError

MODELS = '''
import torch
from torch import nn


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.img = nn.Linear(16, 8)
        self.txt = nn.Embedding(100, 8)

    def forward(self, image, tokens, mask=None):
        return self.img(image) + self.txt(tokens).mean(1)


def one_input_given(batch_size=4):
    return TwoInputs(), (torch.empty(batch_size, 16),)


def unknown_keyword(batch_size=4):
    return TwoInputs(), {"image": torch.empty(batch_size, 16), "tokens": torch.zeros(batch_size, 3, dtype=torch.long),
                         "labels": torch.zeros(batch_size, dtype=torch.long)}


def both_given(batch_size=4):
    return TwoInputs(), {"image": torch.empty(batch_size, 16), "tokens": torch.zeros(batch_size, 3, dtype=torch.long)}
'''


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "two_inputs.py"
    path.write_text(MODELS)
    return path


@pytest.mark.parametrize("spec, missing", [
    ("TwoInputs", "'tokens'"),          # a class: gpuwise guessed one input from its first layer
    ("one_input_given", "'tokens'"),
    ("unknown_keyword", "'labels'"),
])
def test_inputs_forward_cannot_take_are_refused_naming_its_parameters(models, spec, missing):
    # was: "tracing ... failed in module '<top>' during forward: TypeError: ...", as if gpuwise had failed
    with pytest.raises(WorkloadError) as info:
        trace_workload(Workload(f"{models}:{spec}", batch_size=4))
    message = str(info.value)
    assert not isinstance(info.value, TraceError)
    assert "TwoInputs.forward(image, tokens, mask=None)" in message and missing in message
    assert "return (module, example_inputs)" in message and "\n" not in message


def test_inputs_forward_takes_trace(models):
    assert trace_workload(Workload(f"{models}:both_given", batch_size=4)).param_count == 16 * 8 + 8 + 100 * 8
