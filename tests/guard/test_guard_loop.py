"""The Guard loop: a crash in the step saves the last completed step (and replays the failed batch on
resume); time-based checkpoints; extras and extra_state survive a resume."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpuwise.guard import CheckpointStore, Guard, GuardError

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


def _train_steps(guard, model, steps):
    seen = []
    for batch in guard.batches(max_steps=steps):
        seen.append(batch[2].tolist())
        guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
    return seen


@pytest.mark.parametrize("attach", ["loader", "attach_loader"])
def test_resume_before_the_loader_is_attached_keeps_the_data_position(tmp_path, attach):
    # the defect: resume() before loader() dropped the saved position: the resumed run began the epoch again
    reference, model = _guard(tmp_path / "ref", every_steps=3)
    expected = _train_steps(reference, model, 6)
    reference.close()

    first, model = _guard(tmp_path, every_steps=3)
    assert _train_steps(first, model, 3) == expected[:3]
    first.close()
    model = tiny_model()
    resumed = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    resumed.resume()
    assert resumed.epoch == 0 and resumed.step_count == 3
    if attach == "loader":
        resumed.loader(indexed_dataset(40), batch_size=4, seed=1)
    else:
        from gpuwise.guard import ResumableDataLoader
        resumed.attach_loader(ResumableDataLoader(indexed_dataset(40), 4, seed=1))
    assert _train_steps(resumed, model, 6) == expected[3:]
    resumed.close()


def test_a_run_shorter_than_every_steps_ends_with_its_last_step_saved(tmp_path):
    # the defect: 3 steps with every_steps=2 left step-2 only (and a run shorter than every_steps, nothing)
    guard, model = _guard(tmp_path, every_steps=2)
    _train_steps(guard, model, 3)
    assert [p.name for p in guard.store.step_dirs()] == ["step-000000003", "step-000000002"], "saved at the loop's end"
    guard.close()
    assert CheckpointStore(tmp_path / "ckpt").latest()[0].manifest.meta["reason"] == "final"

    # a loop of one's own (no batches()): close() saves the last step
    model = tiny_model()
    own = Guard(tmp_path / "own", model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=100, verbose=False)
    for batch in [indexed_dataset(8)[:4], indexed_dataset(8)[4:]]:
        own.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
    assert own.store.step_dirs() == []
    own.close()
    assert [p.name for p in own.store.step_dirs()] == ["step-000000002"]
    # nothing new to save: a resumed run that is already done writes nothing
    again = Guard(tmp_path / "own", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    again.resume()
    again.close()
    assert [p.name for p in again.store.step_dirs()] == ["step-000000002"]


def test_a_failed_loop_is_not_saved_at_close_by_the_context_manager(tmp_path):
    model = tiny_model()
    with pytest.raises(RuntimeError, match="after the step"):
        with Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=1,
                   verbose=False) as guard:
            guard.step(indexed_dataset(4)[:], lambda b: F.cross_entropy(model(b[0]), b[1]))
            raise RuntimeError("a bug in the caller's code after the step")  # its state is half-done
    assert guard.store.step_dirs() == []


def test_an_unusable_checkpoint_folder_is_refused_when_the_guard_is_created(tmp_path):
    # the defect: found only at the first save (a warning, an hour into the run)
    (tmp_path / "afile").write_text("x")
    model = tiny_model()
    with pytest.raises(GuardError, match=r"checkpoint directory .*afile/ck cannot be created: Not a directory "
                                         r"\(.*afile is a file, not a directory\)$"):
        Guard(tmp_path / "afile" / "ck", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    with pytest.raises(GuardError, match="cannot be created: File exists"):
        Guard(tmp_path / "afile", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    guard = Guard(tmp_path / "new" / "ck", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    guard.close()
    # created, its write check removed; only the lock naming this run stays (docs/guard.md: one run per directory)
    assert (tmp_path / "new" / "ck").is_dir() and [p.name for p in (tmp_path / "new" / "ck").iterdir()] == [".gpuwise-lock"]


def test_an_unwritable_checkpoint_folder_is_refused_when_the_guard_is_created(tmp_path, monkeypatch):
    import os as _os

    real_open = _os.open

    def read_only(path, flags, *a):
        if ".gpuwise-write-check-" in str(path):
            raise OSError(30, "Read-only file system")
        return real_open(path, flags, *a)

    monkeypatch.setattr("gpuwise.guard.checkpoint.os.open", read_only)
    model = tiny_model()
    with pytest.raises(GuardError, match=r"checkpoint directory .*ro is not writable: Read-only file system$"):
        Guard(tmp_path / "ro", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
