"""The resumable loader refuses a sampler of the user's own in one GuardError line, and a restart with another seed
ends the checkpoint's epoch in that epoch's order (nothing skipped or repeated), the new seed from the next epoch.

The defects: ``guard.loader(ds, bs, sampler=...)`` raised a bare ValueError; ``load_state_dict`` ignored the
checkpoint's seed, so a restart with another seed switched to another permutation mid-epoch, silently.
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import WeightedRandomSampler

from gpuwise.guard import Guard, GuardError, ResumableDataLoader

from .helpers import indexed_dataset, tiny_model


def _ids(batch) -> list[int]:
    return batch[2].tolist()


def _epochs(data, *, seed: int, batch_size: int = 4, epochs: int = 2) -> list[list[int]]:
    """The batches (as sample ids) of the first ``epochs`` epochs of an uninterrupted loader."""
    loader = ResumableDataLoader(data, batch_size=batch_size, seed=seed)
    return [[i for b in loader for i in _ids(b)] for _ in range(epochs)]


@pytest.mark.parametrize("argument,value,instead", [
    ("sampler", WeightedRandomSampler(torch.ones(16), 16), "Subset"),
    ("batch_sampler", [[0, 1]], "batch_size="),
    ("generator", torch.Generator(), "seed="),
])
def test_a_sampler_of_ones_own_is_refused_in_one_guard_error_line(tmp_path, argument, value, instead):
    model = tiny_model()
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    with pytest.raises(GuardError) as refused:
        guard.loader(indexed_dataset(16), batch_size=4, **{argument: value})
    guard.close()
    message = str(refused.value)
    assert message.startswith(f"{argument}= ") and instead in message and "\n" not in message


def test_a_restart_with_another_seed_ends_the_epoch_in_the_checkpoints_order(caplog):
    data = indexed_dataset(48)
    old_epoch0, _ = _epochs(data, seed=0)
    _, new_epoch1 = _epochs(data, seed=1)
    first = ResumableDataLoader(data, batch_size=4, seed=0)
    it = iter(first)
    seen = [i for _ in range(3) for i in _ids(next(it))]
    state = first.state_dict()                                  # killed after 3 of 12 batches
    resumed = ResumableDataLoader(data, batch_size=4, seed=1)   # restarted with another seed
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard.sampler"):
        resumed.load_state_dict(state)
    assert resumed.state_dict()["seed"] == 0, "a second restart mid-epoch keeps the epoch's order too"
    seen += [i for b in resumed for i in _ids(b)]
    assert seen == old_epoch0, "the epoch continues as the uninterrupted run would: nothing skipped or repeated"
    assert resumed.state_dict()["seed"] == 1
    assert [i for b in resumed for i in _ids(b)] == new_epoch1, "the new seed orders the next epoch"
    (said,) = [r.getMessage() for r in caplog.records]
    assert "seed=0" in said and "seed=1" in said and "epoch 1" in said and "\n" not in said


def test_a_restart_with_another_seed_at_an_epochs_start_takes_it_now(caplog):
    data = indexed_dataset(16)
    first = ResumableDataLoader(data, batch_size=4, seed=0)
    list(first)                                                  # epoch 0 done: the position is epoch 1's start
    resumed = ResumableDataLoader(data, batch_size=4, seed=1)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard.sampler"):
        resumed.load_state_dict(first.state_dict())
    assert [i for b in resumed for i in _ids(b)] == _epochs(data, seed=1)[1]
    assert len(caplog.records) == 1 and "applies from this epoch" in caplog.records[0].getMessage()


def test_the_same_seed_resumes_without_a_word(caplog):
    data = indexed_dataset(16)
    first = ResumableDataLoader(data, batch_size=4, seed=2)
    next(iter(first))
    resumed = ResumableDataLoader(data, batch_size=4, seed=2)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard.sampler"):
        resumed.load_state_dict(first.state_dict())
    assert not caplog.records


def _train(directory, *, seed: int, max_steps: int, seen: list[int]) -> None:
    model = tiny_model()
    guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=1, verbose=False)
    guard.loader(indexed_dataset(48), batch_size=8, seed=seed)
    guard.resume()

    def loss_fn(b):
        seen.extend(_ids(b))
        return F.cross_entropy(model(b[0]), b[1])

    for batch in guard.batches(max_steps=max_steps):
        guard.step(batch, loss_fn)
    guard.close()


def test_a_guarded_run_restarted_with_another_seed_sees_every_sample_of_the_epoch_once(tmp_path):
    seen: list[int] = []
    _train(tmp_path / "ckpt", seed=0, max_steps=3, seen=seen)   # 3 of the epoch's 6 steps, then stopped
    _train(tmp_path / "ckpt", seed=1, max_steps=6, seen=seen)   # restarted with another seed
    assert seen == _epochs(indexed_dataset(48), seed=0, batch_size=8, epochs=1)[0]
