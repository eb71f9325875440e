"""One run per checkpoint directory: an advisory lock (``flock``) on ``DIR/.gpuwise-lock``, held while a Guard lives.

Two runs writing one directory overwrite each other's steps, resume from each other's state and prune each
other's checkpoints. The process that creates, renames and prunes checkpoints (rank 0: under FSDP the other
ranks only write their shards into the temporary directory rank 0 made) takes an exclusive ``flock`` on the
lock file and writes who it is into it (pid, host, start time, and under torchrun the elastic run id and
restart count). A lock held by another process is waited for (``WAIT_S``: an old run may still be exiting),
then refused in one line naming the directory, the lock file and that owner.

Why ``flock`` and not a pid file: the kernel releases the lock when its holder dies, however it dies
(``kill -9``, a preempted machine), so a restart after a crash is not blocked by what the dead run left. The
file's text only names the owner, except where a held lock provably is not a live other run
(``_not_in_use``): its owner is a dead process on this host (an orphaned child that inherited the descriptor
from a process that was not Python's ``os.fork``), an earlier attempt of this very torchrun run (a worker its
agent gave up on when it survived SIGKILL, stuck in the kernel), or a process of another host while the
directory is on a network file system (a preempted VM's lock outlives it on the server, and nothing here
can check that host). The run then goes on with a warning, the file names it from then on, and it takes the
flock itself as soon as that process lets it go (a later run would otherwise find the lock free).

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuwise.file_locks import cannot_lock
from gpuwise.guard.errors import GuardError
from gpuwise.guard.storage import is_network_fs

log = logging.getLogger(__name__)

LOCK_FILE = ".gpuwise-lock"
WAIT_S = 30.0   # how long a held directory is waited for before the refusal (an old process still exiting)
POLL_S = 0.5
# torchrun's run id when none was given (--rdzv-id defaults to "none"): unrelated jobs share it
_UNNAMED_RUNS = frozenset({"", "none"})


@dataclass(frozen=True)
class Owner:
    """Who holds a checkpoint directory, as its lock file says."""
    pid: int | None
    host: str
    pid_namespace: str
    started_t_s: float | None
    run_id: str | None = None    # torchrun's TORCHELASTIC_RUN_ID
    restart: int | None = None   # torchrun's TORCHELASTIC_RESTART_COUNT: which attempt of that run

    @classmethod
    def me(cls) -> "Owner":
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "")
        return cls(os.getpid(), socket.gethostname(), _pid_namespace(), time.time(),
                   os.environ.get("TORCHELASTIC_RUN_ID") or None, int(restart) if restart.isdigit() else None)

    @classmethod
    def from_text(cls, text: str) -> "Owner | None":
        try:
            d = json.loads(text)
            return cls(int(d["pid"]), str(d.get("host", ""))[:100], str(d.get("pid_namespace", "")),
                       float(d["started_t_s"]) if d.get("started_t_s") is not None else None,
                       str(d["run_id"])[:200] if d.get("run_id") is not None else None,
                       int(d["restart"]) if d.get("restart") is not None else None)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def to_text(self) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "pid_namespace": self.pid_namespace,
                           "started_t_s": self.started_t_s, "run_id": self.run_id, "restart": self.restart}) + "\n"

    def describe(self) -> str:
        since = (f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.started_t_s))}"
                 if self.started_t_s else "")
        run = f", torchrun run {self.run_id} restart {self.restart}" if self.run_id else ""
        return f"pid {self.pid} on host {self.host or '?'}{since}{run}"

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

    def is_earlier_attempt_of(self, other: "Owner") -> bool:
        """The same named torchrun run, an earlier restart: its agent replaced it before starting ``other``."""
        return (self.run_id is not None and self.run_id not in _UNNAMED_RUNS and self.run_id == other.run_id
                and self.restart is not None and other.restart is not None and self.restart < other.restart)


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
# A DirectoryLock collected while its own thread is inside ``_held_section`` (the garbage collector runs finalizers
# at any allocation, ``Owner.me()`` in ``_hold`` say): its drop waits here for the section's end, since taking
# ``_held_lock`` again in that thread would deadlock (a Guard never closed, collected as the next one locked).
_pending_drops: list[tuple[int, int]] = []
_section = threading.local()


@contextmanager
def _held_section() -> Iterator[None]:
    """``_held_lock`` held, with the drops deferred while this thread held it done before it is let go."""
    with _held_lock:
        _section.inside = True
        try:
            yield
        finally:
            while _pending_drops:
                _drop_held(_pending_drops.pop())
            _section.inside = False


def lock_directory(directory: Path) -> DirectoryLock | None:
    """Hold ``directory`` for this run: GuardError (one line, naming the other process) when another live process
    holds it for longer than ``WAIT_S``; None (after a warning) where the file system cannot lock. The directory
    must exist."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.warning("%s cannot be locked (%s): a second run on this directory would not be refused", directory,
                    exc.strerror or exc)
        return None
    kept = False
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        deadline, waiting = time.monotonic() + WAIT_S, False
        while True:
            with _held_section():
                taken = key in _held or _try_flock(directory, fd)   # in _held: this process holds it already
                if taken is None:
                    return None
                if taken:
                    kept = _hold(fd, key)
                    return DirectoryLock(key)
            owner = _read_owner(fd)
            reason = _not_in_use(directory, owner)
            if reason is not None:
                log.warning("%s", reason)
                with _held_section():
                    kept = _hold(fd, key)   # without the flock, but the file names this run from now on
                if kept:   # and the flock becomes this run's once that holder lets it go
                    threading.Thread(target=_take_when_free, args=(directory, key, fd), name="gpuwise-dirlock",
                                     daemon=True).start()
                return DirectoryLock(key)
            if time.monotonic() >= deadline:
                raise GuardError(_in_use(directory, owner))
            if not waiting:
                waiting = True
                log.warning("%s is locked by %s: waiting up to %g s for it to end", directory,
                            _who(owner), WAIT_S)
            time.sleep(POLL_S)
    finally:
        if not kept:
            os.close(fd)   # a second descriptor of a file this process locks: closing it keeps the flock


def _try_flock(directory: Path, fd: int) -> bool | None:
    """True: locked; False: another process holds it; None (after a warning): the file system cannot lock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        if cannot_lock(exc):
            log.warning("%s: the file system does not lock files (%s): a second run on this directory "
                        "would not be refused; give each run its own directory", directory, exc.strerror or exc)
            return None
        raise
    return True


def _take_when_free(directory: Path, key: tuple[int, int], fd: int) -> None:
    """A run that went on past a lock held for a process that cannot write (``_not_in_use``) takes the flock as
    soon as that process lets it go: otherwise a later run would find it free, never read the file that names
    this live run, and write the same directory."""
    while True:
        time.sleep(POLL_S)
        with _held_section():
            entry = _held.get(key)
            if entry is None or entry[0] != fd:
                return   # released (or this process forked: the child holds nothing)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                return
            log.info("%s: the process that held its lock is gone; the lock is this run's now", directory)
            return


def _hold(fd: int, key: tuple[int, int]) -> bool:
    """(Under ``_held_lock``.) This process holds the directory: a first holder writes who it is into the file and
    keeps ``fd`` (True); another Guard of this process shares the first one's hold (False: ``fd`` is not kept)."""
    if key in _held:
        _held[key][1] += 1
        return False
    os.ftruncate(fd, 0)
    os.pwrite(fd, Owner.me().to_text().encode(), 0)
    _held[key] = [fd, 1]
    return True


def _read_owner(fd: int) -> Owner | None:
    try:
        return Owner.from_text(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
    except OSError:
        return None


def _not_in_use(directory: Path, owner: Owner | None) -> str | None:
    """Why a lock held for ``owner`` is not a live run that could write ``directory`` (the warning), or None."""
    if owner is None:
        return None
    me = Owner.me()
    if owner.is_dead_here():
        return (f"{directory}: its lock is held, but by a process that inherited it from {owner.describe()}, which "
                "is gone: continuing (the run that locked it cannot write any more)")
    if owner.is_earlier_attempt_of(me):
        return (f"{directory}: its lock is held by {owner.describe()}, an earlier attempt of this torchrun run "
                f"(this is restart {me.restart}): continuing (its agent gave up on that process, which did not "
                "die of SIGKILL, and replaced it: it cannot be training)")
    if owner.host and owner.host != me.host and is_network_fs(directory):
        return (f"{directory} is on a network file system and its lock is held for {owner.describe()}: a lock "
                "cannot be verified across hosts (a preempted machine's lock outlives it on the server), so this "
                "run goes on; make sure that run is stopped")
    return None


def _who(owner: Owner | None) -> str:
    return owner.describe() if owner is not None else "a process that did not say who it is"


def _in_use(directory: Path, owner: Owner | None) -> str:
    return (f"checkpoint directory {directory} is in use by another run ({_who(owner)}; lock "
            f"{directory / LOCK_FILE}, waited {WAIT_S:g} s): two runs in one directory overwrite and prune each "
            "other's checkpoints; give this run its own directory, or stop the other one; if it is gone and its "
            "lock outlived it, pass Guard(lock_directory=False)")


def _drop(key: tuple[int, int]) -> None:
    """One holder of ``key`` let go (``release()``, or its DirectoryLock collected): deferred to the end of the
    section where this thread is inside one already (``_pending_drops``)."""
    if getattr(_section, "inside", False):
        _pending_drops.append(key)
        return
    with _held_section():
        _drop_held(key)


def _drop_held(key: tuple[int, int]) -> None:
    """(Under ``_held_lock``.) One holder of ``key`` fewer; the last one closes the file, releasing the flock."""
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
    global _held_lock, _section
    _held_lock = threading.Lock()   # the parent's may have been held by another thread at the fork
    _section = threading.local()
    _pending_drops.clear()
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
