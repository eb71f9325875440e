"""``guard.micro_batch_size`` reads the micro-batch a full batch is split into: the whole batch before any OOM.

The defect: it read None until the first OOM split, though the docs list it among the attributes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gpuwise.guard import CheckpointStore, Guard, GuardError, inject_oom_above

from .helpers import indexed_dataset, tiny_model


def _guard(tmp_path, **kw) -> tuple[Guard, torch.nn.Module]:
    model = tiny_model()
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False, **kw)
    return guard, model


def _loss(model):
    return lambda b: F.cross_entropy(model(b[0]), b[1])


def test_with_a_loader_it_is_the_loaders_batch_before_any_step_and_after_a_short_last_batch(tmp_path):
    guard, model = _guard(tmp_path)
    guard.loader(indexed_dataset(20), batch_size=8)       # batches of 8, 8, 4
    assert guard.micro_batch_size == 8
    for batch in guard.batches(max_steps=3):
        guard.step(batch, _loss(model))
    guard.close()
    assert guard.micro_batch_size == 8, "an epoch's short last batch is not the run's micro-batch"


def test_in_a_loop_of_ones_own_it_is_the_batch_once_a_step_ran(tmp_path):
    guard, model = _guard(tmp_path)
    assert guard.micro_batch_size is None, "no batch seen, none given: unknown"
    guard.step(indexed_dataset(10)[:], _loss(model))
    guard.close()
    assert guard.micro_batch_size == 10


def test_a_given_size_larger_than_the_batch_reads_as_the_batch(tmp_path):
    guard, model = _guard(tmp_path, micro_batch_size=32)
    guard.loader(indexed_dataset(16), batch_size=8)
    assert guard.micro_batch_size == 8
    guard.close()


def test_after_an_oom_it_is_the_smaller_size_and_the_checkpoint_keeps_the_split(tmp_path):
    guard, model = _guard(tmp_path, every_steps=1)
    guard.loader(indexed_dataset(24), batch_size=12)
    for batch in guard.batches(max_steps=2):
        guard.step(batch, inject_oom_above(_loss(model), 6))
    guard.close()
    assert guard.micro_batch_size == 6
    assert CheckpointStore(tmp_path / "ckpt").latest()[0].manifest.meta["micro_batch_size"] == 6


def test_a_checkpoint_without_a_split_resumes_without_one(tmp_path):
    guard, model = _guard(tmp_path, every_steps=1)
    guard.loader(indexed_dataset(24), batch_size=12)
    for batch in guard.batches(max_steps=1):
        guard.step(batch, _loss(model))
    guard.close()
    resumed, _ = _guard(tmp_path)
    resumed.loader(indexed_dataset(48), batch_size=24)     # a larger batch on restart: still the whole batch
    resumed.resume()
    assert resumed.micro_batch_size == 24
    resumed.close()


def test_setting_it_splits_later_steps_and_checks_the_value(tmp_path):
    guard, model = _guard(tmp_path)
    guard.micro_batch_size = 3
    guard.step(indexed_dataset(10)[:], _loss(model))
    assert guard.micro_batch_size == 3
    try:
        guard.micro_batch_size = 0
    except GuardError as exc:
        assert "micro_batch_size" in str(exc)
    else:
        raise AssertionError("micro_batch_size = 0 must be refused")
    guard.close()
