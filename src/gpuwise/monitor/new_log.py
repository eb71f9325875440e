"""A new run log, held for as long as its writer lasts: one home for the rule that a run log holds one run.

``gpuwise run``, ``watch --log`` and ``exporter --log`` all claim their log here: a path is created
exclusively (``O_EXCL``) and held under an exclusive ``flock``, so two writers given the same path at once
never both write into it, and a path that already holds something (another run's samples and meta) is
refused in one line (MonitorError, exit 2), the file left as it was. An existing empty file (``mktemp``) is
taken. A writer that fails before it starts removes the log it created (``discard_log``).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from gpuwise.file_locks import cannot_lock
from gpuwise.monitor.errors import MonitorError

try:
    import fcntl        # flock: a writer holds its run log (POSIX)
except ImportError:     # pragma: no cover - not POSIX
    fcntl = None

logger = logging.getLogger(__name__)


def default_log_path(directory: str | Path = ".") -> Path:
    """A new run log in ``directory``: ``gpuwise-run-YYYYmmdd-HHMMSS.db``, else ``…-2.db``, ``…-3.db``, …
    The file is created here, empty and exclusively (``O_EXCL``), so two runs started in the same second,
    in this process or another, never share one; MonitorError (exit 2) when none can be created."""
    stem = f"gpuwise-run-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in range(1, 10_000):
        path = Path(directory, f"{stem}.db" if n == 1 else f"{stem}-{n}.db")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            continue
        except OSError as exc:
            raise MonitorError(f"cannot write the run log {path}: {exc.strerror or exc}") from None
        return path
    raise MonitorError(f"cannot name a new run log in {directory}: {stem}.db to {stem}-9999.db all exist; pass --log")


@dataclass
class NewLog:
    """The run log a run holds: ``path``, whether this run ``created`` it, and ``fd``, open with an exclusive
    ``flock`` for as long as the run lasts (None where the platform has no ``flock``)."""

    path: Path
    created: bool
    fd: int | None = None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)      # closing the descriptor drops the flock
            self.fd = None


RUN_HINT = ", or leave --log out for a fresh gpuwise-run-….db"   # what ``gpuwise run`` does without --log


def hold(log: Path, fd: int, created: bool, hint: str = "") -> NewLog:
    """``fd`` (``log`` opened) locked exclusively for this run, or MonitorError (the descriptor closed) when another
    run holds it or it already holds a run. ``hint`` ends the message (the writer's other way out). On a file
    system that does not do ``flock`` the run goes on unlocked, with a warning: only ``O_EXCL`` and the
    emptiness check then keep a second run out."""
    claim = NewLog(log, created, fd)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if cannot_lock(exc):
            logger.warning("%s: the file system does not lock files (%s): a second run given this --log at the "
                           "same time would not be refused", log, exc.strerror or exc)
        else:
            claim.release()
            raise MonitorError(f"--log {log} is being written by another run (a run log holds one run): name a "
                               f"new file{hint}") from None
    if os.fstat(fd).st_size:       # looked at under the lock: a run that ended since has written it
        claim.release()
        raise MonitorError(f"--log {log} already exists (a run log holds one run): name a new file{hint}")
    return claim


def create_new_log(path: str | Path, hint: str = "") -> NewLog:
    """``--log PATH`` for a new run: PATH is created here, empty and exclusively (``O_EXCL``), and held under an
    exclusive ``flock`` while the run lasts, so two runs given the same PATH at once never both write into it:
    the second is refused. A run log holds one run (its meta: the command, its workload, its exit code), so
    writing a second run into it would mix the two: a PATH that already holds something is refused in one line
    (MonitorError, exit 2) before the command starts, and the file is left as it was. An existing empty file
    (``mktemp``) is taken, as it is, unless another run holds it. ``hint`` ends a refusal (``RUN_HINT``)."""
    log = Path(path)
    try:
        return hold(log, os.open(log, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), created=True, hint=hint)
    except FileExistsError:
        pass
    except OSError as exc:
        raise MonitorError(f"cannot write the run log {log}: {exc.strerror or exc}") from None
    if log.is_dir():
        raise MonitorError(f"--log {log} is a directory: name a new file{hint}")
    try:
        fd = os.open(log, os.O_RDONLY)     # flock needs no write access; SQLite opens it for writing itself
    except OSError as exc:      # a dangling link, a file gone since
        raise MonitorError(f"cannot write the run log {log}: {exc.strerror or exc}") from None
    return hold(log, fd, created=False, hint=hint)


def discard_log(claim: NewLog) -> None:
    """A writer that failed before it started (a run before its command, an exporter before it served) leaves
    no run log: the file it created is removed (with SQLite's side files), an empty file it was given is
    emptied again."""
    try:
        if claim.created:
            for path in (claim.path, *(Path(f"{claim.path}{side}") for side in ("-journal", "-wal", "-shm"))):
                path.unlink(missing_ok=True)
        else:
            os.truncate(claim.path, 0)
    except OSError:
        pass
    claim.release()
