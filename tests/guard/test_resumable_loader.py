"""The data loader resumes at the next unseen sample: nothing skipped, nothing repeated."""

from __future__ import annotations

import torch

from gpuwise.guard import ResumableDataLoader

from .helpers import indexed_dataset


def _ids(batch) -> list[int]:
    return batch[2].tolist()


def test_resume_mid_epoch_continues_with_exactly_the_unseen_samples():
    data = indexed_dataset(50)
    full = ResumableDataLoader(data, batch_size=8, seed=3)
    reference = [_ids(b) for _ in range(2) for b in full]          # two whole epochs, uninterrupted

    first = ResumableDataLoader(data, batch_size=8, seed=3)
    it = iter(first)
    seen = [_ids(next(it)) for _ in range(4)]
    state = first.state_dict()                                      # killed after 4 batches
    resumed = ResumableDataLoader(data, batch_size=8, seed=3)
    resumed.load_state_dict(state)
    seen += [_ids(b) for b in resumed] + [_ids(b) for b in resumed]  # rest of epoch 0, then epoch 1
    assert seen == reference
    assert sorted(i for b in reference[:7] for i in b) == list(range(50))


def test_epochs_are_reshuffled_by_seed_and_epoch():
    data = indexed_dataset(32)
    loader = ResumableDataLoader(data, batch_size=32, seed=0)
    e0, e1 = (_ids(b) for _ in range(2) for b in loader)
    assert sorted(e0) == sorted(e1) == list(range(32)) and e0 != e1
    again = ResumableDataLoader(data, batch_size=32, seed=0)
    assert _ids(next(iter(again))) == e0


def test_ranks_get_disjoint_shards_that_cover_the_epoch():
    data = indexed_dataset(40)
    shards = [[i for b in ResumableDataLoader(data, batch_size=4, seed=1, rank=r, world_size=2) for i in _ids(b)]
              for r in range(2)]
    assert not set(shards[0]) & set(shards[1]) and sorted(shards[0] + shards[1]) == list(range(40))


def test_resume_with_another_world_size_keeps_the_consumed_prefix():
    data = indexed_dataset(48)
    two = [ResumableDataLoader(data, batch_size=4, seed=5, rank=r, world_size=2) for r in range(2)]
    done = []
    for loader in two:
        it = iter(loader)
        done += [i for _ in range(3) for i in _ids(next(it))]       # 3 steps x 4 samples x 2 ranks
    one = ResumableDataLoader(data, batch_size=4, seed=5)
    one.load_state_dict(two[0].state_dict())
    rest = [i for b in one for i in _ids(b)]
    assert sorted(done + rest) == list(range(48))


def test_state_excluding_the_last_batch_replays_it():
    data = indexed_dataset(16)
    loader = ResumableDataLoader(data, batch_size=4, seed=0)
    it = iter(loader)
    next(it)
    crashed_on = _ids(next(it))
    again = ResumableDataLoader(data, batch_size=4, seed=0)
    again.load_state_dict(loader.state_dict(exclude_last_batch=True))
    assert _ids(next(iter(again))) == crashed_on


def test_iterating_does_not_touch_the_global_torch_rng():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    loader = ResumableDataLoader(indexed_dataset(16), batch_size=4, seed=0)
    for _ in loader:
        pass
    assert torch.equal(torch.rand(3), expected)
