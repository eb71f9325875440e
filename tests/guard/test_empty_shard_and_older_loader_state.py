"""Two edges of the resumable loader outside ``guard.batches()``:

- a loop of the user's own over a loader (or a plain DataLoader over a ``ResumableSampler``) that gives this rank no
  sample (``drop_last`` with fewer samples than ranks) is refused in one ``GuardError`` line: before, only
  ``guard.batches()`` refused it, and a loop of one's own ran every epoch on nothing, silently;
- a loader state saved by older gpuwise at an epoch's last step (``consumed`` = the shard's length, the epoch not
  yet advanced) and resumed on another world size goes on at the next epoch: before, the converted position fell
  short of the new shard's length and the epoch's tail was trained again as the same epoch.
"""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

from gpuwise.guard import GuardError, ResumableDataLoader, ResumableSampler

from .helpers import indexed_dataset


def _ids(loader: ResumableDataLoader) -> list[list[int]]:
    return [batch[2].tolist() for batch in loader]


@pytest.mark.parametrize("rank", [0, 3])
def test_a_loop_of_your_own_over_a_loader_with_no_sample_for_this_rank_is_refused(rank):
    # what guard.loader builds on rank `rank` of `torchrun --nproc-per-node 4` over 3 samples with drop_last
    loader = ResumableDataLoader(indexed_dataset(3), batch_size=2, rank=rank, world_size=4, drop_last=True)
    with pytest.raises(GuardError) as refused:
        for _ in loader:
            pass
    message = str(refused.value)
    assert "3 samples, 4 ranks, batch size 2, drop_last=True" in message and "\n" not in message


def test_a_plain_dataloader_over_a_sampler_with_no_sample_for_this_rank_is_refused():
    sampler = ResumableSampler(3, rank=1, world_size=4, drop_last=True)
    with pytest.raises(GuardError) as refused:
        for _ in DataLoader(indexed_dataset(3), batch_size=2, sampler=sampler):
            pass
    message = str(refused.value)
    assert "3 samples, 4 ranks" in message and "drop_last" in message and "\n" not in message


@pytest.mark.parametrize(("data_len", "saved_world", "world", "drop_last"),
                         [(10, 1, 4, False), (9, 1, 2, False), (10, 2, 4, False), (10, 4, 1, True)])
def test_an_epoch_end_saved_by_older_gpuwise_resumes_at_the_next_epoch_on_another_world_size(
        data_len, saved_world, world, drop_last):
    data = indexed_dataset(data_len)
    # Older gpuwise saved the position after an epoch's last batch as that epoch, all of each rank's shard consumed.
    saved_shard_len = ResumableSampler(data_len, world_size=saved_world, drop_last=drop_last).shard_len
    older_state = {"epoch": 0, "consumed": saved_shard_len, "seed": 0, "world_size": saved_world}
    for rank in range(world):
        resumed = ResumableDataLoader(data, batch_size=2, rank=rank, world_size=world, drop_last=drop_last)
        resumed.load_state_dict(older_state)
        next_epoch = ResumableDataLoader(data, batch_size=2, rank=rank, world_size=world, drop_last=drop_last)
        next_epoch.load_state_dict({"epoch": 1, "consumed": 0, "seed": 0, "world_size": world})
        assert (resumed.epoch, resumed.consumed) == (1, 0), f"rank {rank}"
        assert _ids(resumed) == _ids(next_epoch), f"rank {rank}: epoch 1's order from its start"


def test_a_mid_epoch_position_on_another_world_size_keeps_the_consumed_prefix():
    # what the epoch-end rule must leave alone: each of 4 ranks trained its first batch of 2, 8 of the 10 samples
    data = indexed_dataset(10)
    trained = [i for rank in range(4)
               for i in _ids(ResumableDataLoader(data, batch_size=2, rank=rank, world_size=4))[0]]
    resumed = ResumableDataLoader(data, batch_size=2, rank=0, world_size=1)
    resumed.load_state_dict({"epoch": 0, "consumed": 2, "seed": 0, "world_size": 4})
    rest = [i for ids in _ids(resumed) for i in ids]
    assert sorted(trained + rest) == list(range(10)), "the epoch's other 2 samples, none repeated"
