"""A disk that holds exactly ``keep`` checkpoints keeps saving: on ENOSPC the oldest is deleted and the save retried.

The defect: the new checkpoint is written before the oldest is pruned, so on such a disk every save after the
``keep``-th failed with ENOSPC, and the run stopped after ``max_save_failures``.
"""

from __future__ import annotations

import errno
import logging
import subprocess
import uuid

import pytest
import torch

from gpuwise.guard import CheckpointStore, GuardError
from gpuwise.guard import storage

STATE_FLOATS = 21_000  # a state.pt of about 84 KiB: three fit a 300 KiB tmpfs, four do not


@pytest.fixture
def disk_full_once(monkeypatch):
    """Make the next ``times`` checkpoint files fail with ``errno_`` at their first write (an injected error)."""

    def arm(times: int = 1, errno_: int = errno.ENOSPC) -> list[int]:
        original = storage.HashingWriter.write
        failing: list[int] = []   # the errno of each file made to fail

        def write(self, data):
            # marked on the writer itself: torch's zip writer may try the first write again
            if self.bytes_written == 0 and (getattr(self, "disk_full", False) or len(failing) < times):
                if not getattr(self, "disk_full", False):
                    self.disk_full = True
                    failing.append(errno_)
                raise OSError(errno_, "No space left on device")
            return original(self, data)

        monkeypatch.setattr(storage.HashingWriter, "write", write)
        return failing

    return arm


def _steps(store: CheckpointStore) -> list[int]:
    return [int(p.name.split("-")[1]) for p in store.step_dirs()]


@pytest.mark.parametrize("errno_", [errno.ENOSPC, errno.EDQUOT])
def test_full_disk_deletes_the_oldest_checkpoint_and_saves_again(tmp_path, disk_full_once, caplog, errno_):
    store = CheckpointStore(tmp_path, keep=3)
    for step in (1, 2, 3):
        store.save({"w": torch.full((10,), float(step))}, step, 0)
    failed = disk_full_once(errno_=errno_)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard.checkpoint"):
        ckpt = store.save({"w": torch.full((10,), 4.0)}, 4, 0)
    assert failed == [errno_], "the first attempt, and only it, hit the injected full disk"
    assert ckpt.step == 4 and _steps(store) == [4, 3, 2]
    assert torch.equal(store.load_state(store.latest()[0])["w"], torch.full((10,), 4.0))
    (record,) = [r for r in caplog.records if "to make room" in r.getMessage()]
    assert record.levelno == logging.WARNING and "step-000000001" in record.getMessage()
    assert "\n" not in record.getMessage()
    assert not list(tmp_path.glob(".tmp-*")), "the failed attempt's files must be gone"


def test_the_only_checkpoint_is_never_deleted_to_make_room(tmp_path, disk_full_once):
    store = CheckpointStore(tmp_path, keep=3)
    store.save({"w": torch.ones(10)}, 1, 0)
    disk_full_once()
    with pytest.raises(GuardError, match=r"No space left on device.*step-000000001 is intact"):
        store.save({"w": torch.zeros(10)}, 2, 0)
    assert _steps(store) == [1]


def test_the_retry_happens_once_and_keeps_the_newest_checkpoint(tmp_path, disk_full_once):
    store = CheckpointStore(tmp_path, keep=3)
    for step in (1, 2, 3):
        store.save({"w": torch.ones(10)}, step, 0)
    disk_full_once(times=2)   # the retry fails too: the save fails, the newest checkpoint stays
    with pytest.raises(GuardError, match=r"checkpoint of step 4 not written.*step-000000003 is intact"):
        store.save({"w": torch.zeros(10)}, 4, 0)
    assert _steps(store) == [3, 2]


def test_room_made_in_vain_deletes_nothing_more_until_a_save_is_written(tmp_path, disk_full_once):
    """A disk too small for one new checkpoint: the first full-disk save deletes the oldest and still fails; the
    next deleted the next oldest (was: one old checkpoint lost at every save, down to the last). Once a save is
    written, room is made again."""
    store = CheckpointStore(tmp_path, keep=3)
    for step in (1, 2, 3):
        store.save({"w": torch.ones(10)}, step, 0)
    disk_full_once(times=3)   # step 4, its retry, and step 5 meet the full disk
    with pytest.raises(GuardError, match="checkpoint of step 4 not written"):
        store.save({"w": torch.zeros(10)}, 4, 0)
    assert _steps(store) == [3, 2]
    with pytest.raises(GuardError, match=r"checkpoint of step 5 not written.*step-000000003 is intact"):
        store.save({"w": torch.zeros(10)}, 5, 0)
    assert _steps(store) == [3, 2], "room made in vain: nothing more deleted"
    assert store.save({"w": torch.zeros(10)}, 6, 0).step == 6
    assert store.make_room(7) == [tmp_path / "step-000000002"], "a written save lets room be made again"


def test_other_write_errors_delete_nothing(tmp_path, disk_full_once):
    store = CheckpointStore(tmp_path, keep=2)
    for step in (1, 2):
        store.save({"w": torch.ones(10)}, step, 0)
    disk_full_once(errno_=errno.EIO)
    with pytest.raises(GuardError, match="checkpoint of step 3 not written"):
        store.save({"w": torch.zeros(10)}, 3, 0)
    assert _steps(store) == [2, 1]


def test_a_corrupt_newest_checkpoint_is_not_counted_as_verified(tmp_path, disk_full_once):
    store = CheckpointStore(tmp_path, keep=3)
    for step in (1, 2, 3):
        store.save({"w": torch.ones(10)}, step, 0)
    (tmp_path / "step-000000003" / "state.pt").write_bytes(b"garbage")
    disk_full_once()
    assert store.save({"w": torch.zeros(10)}, 4, 0).step == 4
    assert 2 in _steps(store) and 1 not in _steps(store), "step 1 made room; step 2, the newest verified, stayed"


@pytest.fixture
def small_tmpfs(tmp_path):
    mount_point = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mount_point)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("mounting a tmpfs needs root; the injected-error tests above cover ENOSPC")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_real_disk_holding_keep_checkpoints_keeps_saving(small_tmpfs):
    store = CheckpointStore(small_tmpfs, keep=3)
    for step in range(1, 7):
        store.save({"w": torch.full((STATE_FLOATS,), float(step))}, step, 0)
    assert _steps(store) == [6, 5, 4]
    ckpt, skipped = store.latest()
    assert ckpt.step == 6 and not skipped
    assert torch.equal(store.load_state(ckpt)["w"], torch.full((STATE_FLOATS,), 6.0))


def test_room_made_in_vain_holds_across_a_restart(tmp_path, disk_full_once):
    """A restarted run (torchrun, a preemption) on the same too-full disk deleted another checkpoint at its first save,
    one per restart down to the last: the mark is in the directory, gone once a checkpoint is written."""
    first = CheckpointStore(tmp_path, keep=3)
    for step in (1, 2, 3):
        first.save({"w": torch.ones(10)}, step, 0)
    disk_full_once(times=3)
    with pytest.raises(GuardError):
        first.save({"w": torch.zeros(10)}, 4, 0)   # deletes step 1, fails all the same
    restarted = CheckpointStore(tmp_path, keep=3)
    with pytest.raises(GuardError, match="checkpoint of step 4 not written"):
        restarted.save({"w": torch.zeros(10)}, 4, 0)
    assert _steps(restarted) == [3, 2], "the restart made no room in vain again"
    assert restarted.save({"w": torch.zeros(10)}, 5, 0).step == 5
    assert CheckpointStore(tmp_path, keep=3).make_room(6) == [tmp_path / "step-000000002"]
