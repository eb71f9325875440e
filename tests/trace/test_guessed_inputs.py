"""A factory that returns no example inputs gets one guessed from its first layer. A trace that fails on the guess
says so in its one line, with the guess and how to give real inputs; the sizes the guess took (images at 224 px,
128 tokens) are the trace's, for the job recorded; a --seq-len/--image-size the guess does not take is said to
change nothing."""

from __future__ import annotations

import pytest

from gpuwise.trace import ModelCodeError, TraceError, trace_workload
from gpuwise.workload import Workload, WorkloadError

MODELS = '''
import torch
from torch import nn


class DictIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, batch):
        return self.fc(batch["x"])


class Reshapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(x.view(-1, 7, 16))


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x, mask):
        return self.fc(x)


class TinyViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, 16, stride=16)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.patch(x).flatten(2).mean(-1))


def make_dict():
    return DictIn()


def make_reshapes():
    return Reshapes()


def make_two_inputs():
    return TwoInputs()


def make_vit():
    return TinyViT()


def make_mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def make_embedding():
    return nn.Embedding(100, 8)


def make_mlp_sized(image_size=32):
    return nn.Linear(3 * image_size, 10)
'''

GUESSED = "the factory returned no example inputs, so gpuwise guessed its input as (4, 16) float32"


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "guessed.py"
    path.write_text(MODELS)
    return path


def _trace(models, factory, **kw):
    return trace_workload(Workload(model=f"{models}:{factory}", batch_size=4, optimizer="sgd", **kw), use_cache=False)


@pytest.mark.parametrize("factory, error", [
    ("make_dict", TraceError),           # forward indexes the guessed tensor with a string
    ("make_reshapes", ModelCodeError),   # a torch operator refuses the guessed shape
    ("make_two_inputs", WorkloadError),  # forward takes two inputs, one was guessed
])
def test_a_trace_that_fails_on_a_guessed_input_says_it_was_guessed_and_how_to_give_real_ones(models, factory, error):
    with pytest.raises(error) as info:
        _trace(models, factory)
    message = str(info.value)
    assert GUESSED in message and "from its first layer (Linear)" in message
    assert "return (module, example_inputs) from the factory to give real ones" in message and "\n" not in message


def test_a_failure_on_inputs_the_factory_gave_says_nothing_of_a_guess(tmp_path):
    given = tmp_path / "given.py"
    given.write_text(MODELS + "\n\ndef given(batch_size=4):\n    return DictIn(), (torch.empty(batch_size, 16),)\n")
    with pytest.raises(TraceError) as info:
        _trace(given, "given")
    assert "guessed" not in str(info.value)


def test_guessed_images_record_the_side_they_were_made_at(models):
    trace = _trace(models, "make_vit")
    assert dict(trace.input_sizes) == {"image_size": 224, "seq_len": None}
    assert trace.sized_job(trace.workload).image_size == 224
    assert _trace(models, "make_vit", image_size=64).sized_job(Workload(f"{models}:make_vit")).image_size == 64


def test_guessed_tokens_record_their_length(models):
    trace = _trace(models, "make_embedding")
    assert dict(trace.input_sizes) == {"seq_len": 128, "image_size": None}


def test_an_image_size_guessed_features_do_not_take_is_said_to_change_nothing_and_left_out(models):
    trace = _trace(models, "make_mlp", image_size=64)
    note = next(n for n in trace.notes if n.startswith("--image-size has no effect"))
    assert "make_mlp takes no image_size parameter" in note and "(4, 32) float32 from its first layer (Linear)" in note
    assert trace.sized_job(trace.workload).image_size is None
    assert not any(n.startswith("--image-size") for n in _trace(models, "make_mlp").notes)   # not given: not said


def test_a_size_the_factory_takes_as_a_parameter_is_its_own_not_the_guess(models):
    trace = _trace(models, "make_mlp_sized", image_size=64)
    assert "image_size" not in dict(trace.input_sizes)
    assert not any(n.startswith("--image-size") for n in trace.notes)
    assert trace.sized_job(trace.workload).image_size == 64


BAG = '''
import torch
from torch import nn


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(5000, 32)
        self.fc = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc(self.emb(x))


def make_bag():
    return Bag()
'''


def test_an_embedding_bag_first_is_guessed_tokens(tmp_path):
    """nn.EmbeddingBag first (a bag-of-words classifier): guessed as float features from the Linear after it,
    which the bag refused ("expected indices to be long or int"); now tokens of --seq-len, as for nn.Embedding."""
    path = tmp_path / "bag.py"
    path.write_text(BAG)
    trace = _trace(path, "make_bag")
    assert dict(trace.input_sizes) == {"seq_len": 128, "image_size": None}
