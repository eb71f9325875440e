"""One run per checkpoint directory: an advisory lock (``flock``) on ``DIR/.gpuwise-lock``, held while a Guard lives.

Two runs writing one directory overwrite each other's steps, resume from each other's state and prune each
other's checkpoints. The process that creates, renames and prunes checkpoints (rank 0: under FSDP the other
ranks only write their shards into the temporary directory rank 0 made) takes an exclusive ``flock`` on the
lock file and writes who it is into it (pid, host, start time). A second live process is refused in one line
naming the directory and that owner.

Why ``flock`` and not a pid file: the kernel releases the lock when its holder dies, however it dies
(``kill -9``, a preempted machine), so a restart after a crash is never blocked by what the dead run left. The
file's text only names the owner; it decides nothing, except in one case: a lock still held while its owner, by
the text, is a dead process on this host (an orphaned child that inherited the descriptor from a process that
was not Python's ``os.fork``) does not block a restart either (a warning says so).

Within one process the lock is shared: a second Guard on the same directory (a notebook cell run again) is the
same run. A child forked by this process (DataLoader workers) closes its inherited descriptor, so the lock
ends with this process, not with its slowest child. Where the file system refuses ``flock`` (some network
mounts), the run goes on with a warning: nothing would stop a second run there.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from gpuwise.guard.errors import GuardError

log = logging.getLogger(__name__)

LOCK_FILE = ".gpuwise-lock"
# errno of a file system that does not do flock (an NFS mount without lockd, some FUSE file systems)
_UNSUPPORTED = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS, errno.EBADF})


@dataclass(frozen=True)
class Owner:
    """Who holds a checkpoint directory, as its lock file says."""
    pid: int | None
    host: str
    pid_namespace: str
    started_t_s: float | None

    @classmethod
    def me(cls) -> "Owner":
        return cls(os.getpid(), socket.gethostname(), _pid_namespace(), time.time())

    @classmethod
    def from_text(cls, text: str) -> "Owner | None":
        try:
            d = json.loads(text)
            return cls(int(d["pid"]), str(d.get("host", ""))[:100], str(d.get("pid_namespace", "")),
                       float(d["started_t_s"]) if d.get("started_t_s") is not None else None)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def to_text(self) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "pid_namespace": self.pid_namespace,
                           "started_t_s": self.started_t_s}) + "\n"

    def describe(self) -> str:
        since = (f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.started_t_s))}"
                 if self.started_t_s else "")
        return f"pid {self.pid} on host {self.host or '?'}{since}"

    def is_dead_here(self) -> bool:
        """This host and pid namespace, and no such process: nothing of that run can still be writing."""
        me = Owner.me()
        if self.pid is None or self.host != me.host or self.pid_namespace != me.pid_namespace:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:   # EPERM: it exists, someone else's
            return False
        return False


class DirectoryLock:
    """This process's hold on one checkpoint directory; ``release()`` (or garbage collection) lets it go."""

    def __init__(self, key: tuple[int, int]) -> None:
        self._key = key
        self._finalizer = weakref.finalize(self, _drop, key)

    def release(self) -> None:
        self._finalizer()


# (st_dev, st_ino) of a lock file -> [fd, holders in this process]
_held: dict[tuple[int, int], list[int]] = {}
_held_lock = threading.Lock()


def lock_directory(directory: Path) -> DirectoryLock | None:
    """Hold ``directory`` for this run: GuardError (one line, naming the other process) when another live process
    holds it; None (after a warning) where the file system cannot lock. The directory must exist."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.warning("%s cannot be locked (%s): a second run on this directory would not be refused", directory,
                    exc.strerror or exc)
        return None
    kept = False
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with _held_lock:
            if key in _held:   # this process holds it already (another Guard on the same directory)
                _held[key][1] += 1
                return DirectoryLock(key)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return _held_elsewhere(directory, fd)
                if exc.errno in _UNSUPPORTED:
                    log.warning("%s: the file system does not lock files (%s): a second run on this directory "
                                "would not be refused; give each run its own directory", directory,
                                exc.strerror or exc)
                    return None
                raise
            os.ftruncate(fd, 0)
            os.pwrite(fd, Owner.me().to_text().encode(), 0)
            _held[key] = [fd, 1]
            kept = True   # the lock lives as long as this descriptor
            return DirectoryLock(key)
    finally:
        if not kept:
            os.close(fd)   # a second descriptor of a file this process locks: closing it keeps the flock


def _held_elsewhere(directory: Path, fd: int) -> None:
    """The lock is another process's: refuse, unless its owner is a dead process on this host."""
    try:
        owner = Owner.from_text(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
    except OSError:
        owner = None
    if owner is not None and owner.is_dead_here():
        log.warning("%s: its lock is held, but by a process that inherited it from %s, which is gone: "
                    "continuing (the run that locked it cannot write any more)", directory, owner.describe())
        return None
    who = owner.describe() if owner is not None else "a process that did not say who it is"
    raise GuardError(f"checkpoint directory {directory} is in use by another run ({who}): two runs in one "
                     "directory overwrite and prune each other's checkpoints; give this run its own directory, "
                     "or stop the other one")


def _drop(key: tuple[int, int]) -> None:
    with _held_lock:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _held[key]
            try:
                os.close(entry[0])  # releases the flock
            except OSError:
                pass


def _forget_in_child() -> None:
    """In a forked child: close the inherited descriptors (the lock stays the parent's, and ends with it)."""
    global _held_lock
    _held_lock = threading.Lock()   # the parent's may have been held by another thread at the fork
    for fd, _ in _held.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


os.register_at_fork(after_in_child=_forget_in_child)
