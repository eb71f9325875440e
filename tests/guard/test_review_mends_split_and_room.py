"""A batch tuple with a tag or None beside its tensors splits its tensors and shares the tag (was: the tuple itself
sliced, micro-batches of the whole batch then of nothing); a 0-dim tensor first in a dict is no batch size (was:
IndexError at every step); a full disk's make-room never deletes the checkpoint a run resumed from for a newer one
a resume refused (was: the resumed-from checkpoint deleted, the refused NaN one kept)."""

from __future__ import annotations

import errno

import torch

from gpuwise.guard import CheckpointStore
from gpuwise.guard.oom import batch_size_of, split_batch


def test_a_tuple_with_a_tag_splits_its_tensors_and_shares_the_tag():
    x, y = torch.arange(8.0), torch.arange(8)
    for tag in (None, "train"):
        parts = split_batch((x, y, tag), 3)
        assert [n for _, n in parts] == [3, 3, 2]
        assert torch.equal(torch.cat([p[0] for p, _ in parts]), x) and all(p[2] == tag for p, _ in parts)


def test_a_zero_dim_tensor_first_in_a_dict_is_no_batch_size():
    batch = {"scale": torch.tensor(1.0), "x": torch.zeros(8, 3)}
    assert batch_size_of(batch) == 8
    parts = split_batch(batch, 4)
    assert [p["x"].shape[0] for p, _ in parts] == [4, 4] and all(p["scale"].item() == 1.0 for p, _ in parts)


def test_make_room_keeps_the_checkpoint_the_run_resumed_from(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path, keep=3)
    store.save({"w": torch.ones(4)}, 1000, 0)
    store.save({"w": torch.full((4,), float("nan"))}, 2000, 0)    # a newer one a resume refused (NaN)
    # the run resumed from step 1000 and saves step 1100 on a full disk: nothing before 1100 but 1000 itself
    assert store.make_room(1100) == []
    assert [p.name for p in store.step_dirs()] == ["step-000002000", "step-000001000"]
    store.save({"w": torch.ones(4)}, 1050, 0)
    assert [p.name for p in store.make_room(1100)] == ["step-000001000"]     # the older of this run's past
    assert [p.name for p in store.step_dirs()] == ["step-000002000", "step-000001050"]
    assert store.make_room(1100) == []     # the newest of this run's past is never deleted
