"""A Guard never closed whose directory lock is collected by the garbage collector while the next Guard of the same
thread locks its directory: the collector runs the finalizer at any allocation, inside the lock's own critical
section (``Owner.me()`` in ``_hold``), and the finalizer took that same non-reentrant lock: the process hung (seen
in tests/guard/test_hostile_checkpoints.py once other allocations moved the collector's timing). The drop now waits
for the section's end."""

from __future__ import annotations

import gc
import threading

from gpuwise.guard import dirlock


class _Cycle:
    """Reachable only through itself: only the garbage collector frees it (and its lock), as an unclosed Guard."""

    def __init__(self, lock):
        self.lock, self.me = lock, self


def test_a_lock_collected_inside_the_next_lock_is_dropped_not_deadlocked(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    _Cycle(dirlock.lock_directory(first))          # unreachable at once, collected at the next gc
    first_key = _key(first)
    me = dirlock.Owner.me

    def collecting_me():
        gc.collect()                                # the collector firing inside the critical section
        return me()

    monkeypatch.setattr(dirlock.Owner, "me", staticmethod(collecting_me))
    held: list = []
    locking = threading.Thread(target=lambda: held.append(dirlock.lock_directory(second)), daemon=True)
    locking.start()
    locking.join(timeout=120)
    assert not locking.is_alive(), "locking the second directory hung"
    assert held and held[0] is not None
    second_key = _key(second)
    # other tests of this process may hold locks of their own: only these two directories' entries are looked at
    assert first_key not in dirlock._held, "the collected lock was dropped once its section ended"
    assert second_key in dirlock._held
    held[0].release()
    assert second_key not in dirlock._held


def _key(directory):
    """``dirlock._held``'s key of a directory's lock file."""
    st = (directory / dirlock.LOCK_FILE).stat()
    return st.st_dev, st.st_ino
