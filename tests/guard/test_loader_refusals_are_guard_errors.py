"""Loaders the guard cannot resume are refused by ``guard.loader(...)`` in one ``GuardError`` line that says what to
do, as every other refusal of the guard is. Before, an IterableDataset, ``in_order=False`` and an empty dataset each
raised a bare ``ValueError`` (which the CLI reports as a bug, exit 1, and ``except GuardError`` does not catch), and
the empty dataset's said nothing of what to do."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import IterableDataset, TensorDataset

from gpuwise.guard import Guard, GuardError

from .helpers import indexed_dataset


class Stream(IterableDataset):
    def __iter__(self):
        return iter(torch.arange(8.0).split(1))


@pytest.fixture
def guard(tmp_path):
    g = Guard(tmp_path / "ckpt", torch.nn.Linear(1, 1), verbose=False)
    yield g
    g.close(check=False, save=False)


def _refusal(guard: Guard, dataset, **loader_kwargs) -> str:
    with pytest.raises(GuardError) as caught:
        guard.loader(dataset, batch_size=4, **loader_kwargs)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_iterable_dataset_is_a_guard_error_saying_to_keep_the_position_or_use_a_map_style_dataset(guard):
    message = _refusal(guard, Stream())
    assert message.startswith("Stream is an IterableDataset: the guard cannot resume mid-stream")
    assert "extra_state=" in message and "map-style dataset" in message


def test_out_of_order_batches_are_a_guard_error_saying_to_leave_in_order_at_true(guard):
    message = _refusal(guard, indexed_dataset(8), num_workers=1, in_order=False)
    assert message.startswith("in_order=False is not taken by the resumable loader")
    assert message.endswith("leave in_order at True")


def test_an_empty_dataset_is_a_guard_error_naming_its_length(guard):
    message = _refusal(guard, TensorDataset(torch.empty(0, 1)))
    assert message.startswith("the dataset is empty (len 0)") and "at least one sample" in message
