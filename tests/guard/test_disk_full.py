"""A full disk (ENOSPC) during a save leaves the previous checkpoint intact and loadable, and says so."""

from __future__ import annotations

import errno
import shutil
import subprocess
import uuid
import warnings

import pytest
import torch
import torch.nn.functional as F

from gpuwise.guard import CheckpointStore, Guard, GuardError
from gpuwise.guard import storage
from gpuwise.guard.storage import low_space_warning
from gpuwise.runlog import read_events

from .helpers import indexed_dataset, tiny_model


@pytest.fixture
def disk_fills_after(monkeypatch):
    """Make every checkpoint write fail with ENOSPC once ``limit`` bytes were written (an injected write error)."""

    def arm(limit: int) -> None:
        original = storage.HashingWriter.write

        def write(self, data):
            if self.bytes_written + len(memoryview(data).cast("B")) > limit:
                raise OSError(errno.ENOSPC, "No space left on device")
            return original(self, data)

        monkeypatch.setattr(storage.HashingWriter, "write", write)

    return arm


def test_enospc_mid_write_keeps_previous_checkpoint_and_names_it(tmp_path, disk_fills_after):
    store = CheckpointStore(tmp_path)
    store.save({"w": torch.ones(1000)}, 1, 0)
    disk_fills_after(2000)
    with pytest.raises(GuardError, match=r"No space left on device.*step-000000001 is intact"):
        store.save({"w": torch.zeros(1000)}, 2, 0)
    ckpt, skipped = store.latest()
    assert ckpt.step == 1 and not skipped
    assert torch.equal(store.load_state(ckpt)["w"], torch.ones(1000))
    assert not list(tmp_path.glob(".tmp-*")), "the half-written checkpoint must be removed"


def _guard(tmp_path, **kw) -> tuple[Guard, torch.nn.Module]:
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(tmp_path / "ckpt", model, opt, every_steps=1, run_log=tmp_path / "run.db", verbose=False, **kw)
    guard.loader(indexed_dataset(), batch_size=8)
    return guard, model


def _loss(model):
    return lambda b: F.cross_entropy(model(b[0]), b[1])


@pytest.mark.parametrize("async_save", [False, True])
def test_training_continues_after_a_failed_save_when_policy_is_warn(tmp_path, disk_fills_after, async_save):
    guard, model = _guard(tmp_path, async_save=async_save, max_save_failures=5)
    batches = guard.batches(max_steps=4)
    guard.step(next(batches), _loss(model))
    guard.wait_for_save()
    disk_fills_after(100)
    with pytest.warns(UserWarning, match="step-000000001 is intact"):
        for batch in batches:
            guard.step(batch, _loss(model))
        guard.close()
    assert guard.step_count == 4
    assert CheckpointStore(tmp_path / "ckpt").latest()[0].step == 1
    assert any(e["kind"] == "checkpoint_failed" for e in read_events(tmp_path / "run.db"))


def test_failed_save_stops_training_when_policy_is_raise(tmp_path, disk_fills_after):
    guard, model = _guard(tmp_path, on_save_error="raise")
    disk_fills_after(100)
    batches = guard.batches(max_steps=2)
    guard.step(next(batches), _loss(model))
    with pytest.raises(GuardError, match="no previous checkpoint"):
        next(batches)  # step 1's checkpoint is written when the loop asks for the next batch
    with pytest.raises(GuardError, match="every checkpoint save of this run failed"):
        guard.close()


def test_low_free_space_is_warned_about(tmp_path):
    free = shutil.disk_usage(tmp_path).free
    assert low_space_warning(tmp_path, checkpoint_bytes=free // 2) is not None
    assert low_space_warning(tmp_path, checkpoint_bytes=1) is None


@pytest.mark.parametrize("async_save", [False, True])
def test_low_disk_warning_points_at_the_users_line(tmp_path, monkeypatch, async_save):
    # the defect: with async_save the warning was issued on the background thread, pointing at threading.py
    monkeypatch.setattr(storage, "free_bytes", lambda path: 1)
    guard, model = _guard(tmp_path, async_save=async_save)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in guard.batches(max_steps=3):
            guard.step(batch, _loss(model))
        guard.close()
    (low,) = [w for w in caught if "the next save may fail" in str(w.message)]
    assert low.category is UserWarning and low.filename == __file__, (low.filename, low.lineno)
    assert any(e["kind"] == "low_disk_space" for e in read_events(tmp_path / "run.db"))


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mount_point = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mount_point)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); the injected-error tests cover ENOSPC")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_real_full_filesystem_keeps_last_good_checkpoint_loadable(tiny_tmpfs):
    torch.manual_seed(0)
    model = torch.nn.Linear(200, 200)  # ~160 KB of weights + 320 KB of Adam state per checkpoint
    opt = torch.optim.Adam(model.parameters())
    guard = Guard(tiny_tmpfs, model, opt, every_steps=1, keep=2, verbose=False)
    x = torch.randn(4, 200)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            guard.step(x, lambda b: model(b).pow(2).mean())
        guard.close()  # writes (tries) step 3's checkpoint
    messages = [str(w.message) for w in caught]
    assert any("No space left on device" in m and "is intact" in m for m in messages), messages
    ckpt, skipped = CheckpointStore(tiny_tmpfs).latest()
    assert ckpt is not None and not skipped
    state = CheckpointStore(tiny_tmpfs).load_state(ckpt)
    assert state["progress"]["step"] == ckpt.step
