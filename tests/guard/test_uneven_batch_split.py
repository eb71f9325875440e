"""A batch whose items disagree on its size (8 inputs, 6 labels) is refused in one GuardError line once an OOM
splits it, naming the items' sizes; a 0-dim tensor in a batch is one value shared by every micro-batch.

The defects: the split paired the wrong samples and torch failed deep inside the loss ("Expected input
batch_size (4) to match target batch_size (2)"); a 0-dim tensor could not be sliced at all.
"""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch
import torch.nn.functional as F

from gpuwise.guard import Guard, GuardError, inject_oom_above, split_batch

from .helpers import tiny_model


def test_an_oom_split_of_a_batch_with_uneven_items_names_their_sizes(tmp_path):
    model = tiny_model()
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    batch = (torch.randn(8, 8), torch.randint(0, 3, (6,)))
    with pytest.raises(GuardError) as refused:
        guard.step(batch, inject_oom_above(lambda b: F.cross_entropy(model(b[0]), b[1]), 4))
    guard.close(save=False)
    message = str(refused.value)
    assert "batch[0]: 8" in message and "batch[1]: 6" in message and "\n" not in message


Pair = namedtuple("Pair", "x y")


@pytest.mark.parametrize("batch,named", [
    ({"input_ids": torch.zeros(8, 3), "labels": torch.zeros(5)}, ["batch['input_ids']: 8", "batch['labels']: 5"]),
    (Pair(torch.zeros(8, 2), torch.zeros(7)), ["batch.x: 8", "batch.y: 7"]),
    ((torch.zeros(8), ["a"] * 3), ["batch[0]: 8", "batch[1]: 3"]),
])
def test_split_batch_names_the_uneven_items_of_any_structure(batch, named):
    with pytest.raises(GuardError) as refused:
        split_batch(batch, 4)
    assert all(n in str(refused.value) for n in named), str(refused.value)


def test_an_unsplit_batch_is_not_checked():
    batch = (torch.zeros(8), torch.zeros(6))
    assert split_batch(batch, 8) == [(batch, 8)]


def test_a_zero_dim_tensor_is_shared_by_every_micro_batch():
    temperature = torch.tensor(0.5)
    pieces = split_batch((torch.arange(6), temperature), 4)
    assert [n for _, n in pieces] == [4, 2]
    assert all(mb[1] is temperature for mb, _ in pieces)
    assert torch.equal(torch.cat([mb[0] for mb, _ in pieces]), torch.arange(6))
