"""Two edges of the resumable loader under the guard:

- an epoch that yields no batch (``drop_last`` with fewer samples than ranks leaves each rank none) is refused in one
  ``GuardError`` line naming why: before, ``guard.batches(max_steps=...)`` went on through empty epochs forever, as
  only ``len(dataset) == 0`` was refused;
- a restart with another seed and another world size judges "mid-epoch" on the saved position: before, one sample
  consumed by a world of 1 converted to 0 of a world of 2, and the epoch restarted in the new seed's order.
"""

from __future__ import annotations

import threading

import pytest
import torch

from gpuwise.guard import Guard, GuardError, ResumableDataLoader

from .helpers import indexed_dataset, tiny_model

DEADLINE_S = 120.0   # an immediate refusal, or a loop that never ends: generous for a loaded machine


def _ids(batch) -> list[int]:
    return batch[2].tolist()


def test_an_epoch_with_no_batch_for_this_rank_is_refused_not_looped_over(tmp_path):
    model = tiny_model()
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    # rank 0 of 4 over 3 samples with drop_last: no rank gets a sample (what guard.loader builds under torchrun)
    guard.attach_loader(ResumableDataLoader(indexed_dataset(3), batch_size=4, rank=0, world_size=4, drop_last=True))
    outcome: dict[str, object] = {}

    def loop() -> None:
        try:
            outcome["batches"] = sum(1 for _ in guard.batches(max_steps=5))
        except GuardError as exc:
            outcome["error"] = str(exc)

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    worker.join(DEADLINE_S)
    looping = worker.is_alive()
    guard.stop_requested = True      # ends a loop that never would (the loop checks it at every epoch)
    worker.join(DEADLINE_S)
    guard.close()
    assert not looping, f"guard.batches() still looping after {DEADLINE_S} s, at epoch {guard.epoch}"
    error = outcome.get("error", "")
    assert "3 samples, 4 ranks, batch size 4, drop_last=True" in error and "\n" not in error, outcome


def test_a_seed_change_after_one_sample_on_another_world_size_ends_the_epoch_in_the_saved_order():
    data = indexed_dataset(16)
    one = ResumableDataLoader(data, batch_size=1, seed=1)
    next(iter(one))                                        # one sample trained by a world of 1, seed 1
    state = one.state_dict()
    assert state["consumed"] == 1
    for rank in range(2):
        resumed = ResumableDataLoader(data, batch_size=4, seed=9, rank=rank, world_size=2)
        resumed.load_state_dict(state)
        saved_order = ResumableDataLoader(data, batch_size=4, seed=1, rank=rank, world_size=2)
        assert [_ids(b) for b in resumed] == [_ids(b) for b in saved_order], f"rank {rank}"
        new_order = ResumableDataLoader(data, batch_size=4, seed=9, rank=rank, world_size=2)
        new_order.load_state_dict({"epoch": 1, "consumed": 0, "seed": 9, "world_size": 2})
        assert [_ids(b) for b in resumed] == [_ids(b) for b in new_order], "the new seed orders the next epoch"


@pytest.mark.parametrize("consumed", [0, 16])
def test_a_seed_change_at_an_epoch_boundary_applies_at_once(consumed):
    # the saved position judged "not begun" (0) or "all handed out" (16): the new seed orders what comes next
    data = indexed_dataset(16)
    resumed = ResumableDataLoader(data, batch_size=4, seed=9, rank=0, world_size=2)
    resumed.load_state_dict({"epoch": 0, "consumed": consumed, "seed": 1, "world_size": 1})
    expected = ResumableDataLoader(data, batch_size=4, seed=9, rank=0, world_size=2)
    expected.load_state_dict({"epoch": 0 if consumed == 0 else 1, "consumed": 0, "seed": 9, "world_size": 2})
    assert resumed.epoch == expected.epoch and [_ids(b) for b in resumed] == [_ids(b) for b in expected]
