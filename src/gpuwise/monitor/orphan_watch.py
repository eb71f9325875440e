"""The watchdog ``gpuwise run`` starts beside its command: when gpuwise dies without saying goodbye (SIGKILL,
the OOM killer), the command's whole process group gets SIGTERM, then SIGKILL after a grace period.

Run as a script (``python -I orphan_watch.py PGID GRACE_S``), with the standard library only, in its own
session so that a terminal's Ctrl-C does not reach it. It reads its stdin, a pipe whose only writer is
gpuwise: one byte means "the run ended normally" (exit quietly); end of file without it means gpuwise is
gone (the kernel closed the pipe). Not covered: processes that left the group (``setsid``, a daemon).
"""

from __future__ import annotations

import os
import signal
import sys
import time

POLL_S = 0.1


def group_alive(pgid: int) -> bool:
    """True while process group ``pgid`` has a member that still runs (one we may not signal counts as
    alive). Zombies do not count: an orphaned worker that has exited waits there until init reaps it,
    which a container's init may never do."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _running_member(pgid)


def _running_member(pgid: int) -> bool:
    """Whether /proc shows a member of ``pgid`` that is not a zombie (True where /proc cannot tell)."""
    members = running_members(pgid)
    return True if members is None else bool(members)


def running_members(pgid: int) -> list[int] | None:
    """The pids of the members of process group ``pgid`` that still run (zombies left out), from /proc; None
    where /proc cannot be read."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    members = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue   # gone since, or not ours to read
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry))
    return sorted(members)


def watch(pgid: int, grace_s: float, stdin_fd: int = 0) -> int:
    """Blocks until gpuwise ends; returns 0 after a goodbye, 1 when the group had to be stopped."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    while True:
        try:
            said = os.read(stdin_fd, 1)
            break
        except InterruptedError:
            continue
    if said:
        return 0
    if not group_alive(pgid):
        return 1
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return 1
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(POLL_S)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return 1


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), float(sys.argv[2])))
