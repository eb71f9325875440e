"""The Guard loop: a crash in the step saves the last completed step (and replays the failed batch on
resume); time-based checkpoints; extras and extra_state survive a resume."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpuwise.guard import CheckpointStore, Guard

from .helpers import indexed_dataset, tiny_model


class _Counter:
    def __init__(self) -> None:
        self.value = 0

    def state_dict(self) -> dict:
        return {"value": torch.tensor(self.value)}

    def load_state_dict(self, state: dict) -> None:
        self.value = int(state["value"])


def _guard(tmp_path, **kw):
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(tmp_path / "ckpt", model, opt, verbose=False, **kw)
    guard.loader(indexed_dataset(40), batch_size=4, seed=1)
    return guard, model


def test_crash_in_a_step_saves_the_last_completed_step_and_resume_replays_the_failed_batch(tmp_path):
    counter = _Counter()
    guard, model = _guard(tmp_path, every_steps=100, extra_state={"counter": counter})
    guard.extras["best_loss"] = 0.25
    seen = []

    def loss_fn(b):
        if guard.step_count == 3:
            seen.append(b[2].tolist())
            raise ValueError("a bug at step 4")
        return F.cross_entropy(model(b[0]), b[1])

    with pytest.raises(ValueError, match="bug at step 4"):
        for batch in guard.batches(max_steps=10):
            counter.value += 1
            guard.step(batch, loss_fn)
    guard.close()
    ckpt = CheckpointStore(tmp_path / "ckpt").latest()[0]
    assert ckpt.step == 3 and ckpt.manifest.meta["reason"] == "crash"

    counter2 = _Counter()
    fresh, _ = _guard(tmp_path, extra_state={"counter": counter2})
    fresh.resume()
    assert fresh.step_count == 3 and fresh.extras == {"best_loss": 0.25} and counter2.value == 4
    assert next(iter(fresh.batches(max_steps=10)))[2].tolist() == seen[0], "the failed batch comes again"
    fresh.close()


def test_every_minutes_saves_when_the_interval_has_passed(tmp_path):
    guard, model = _guard(tmp_path, every_minutes=1e-9)  # due at every step
    for batch in guard.batches(max_steps=3):
        guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
    guard.close()
    assert [p.name for p in CheckpointStore(tmp_path / "ckpt").step_dirs()] == [
        "step-000000003", "step-000000002", "step-000000001"]
