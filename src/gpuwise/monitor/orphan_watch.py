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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


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
    if not _group_alive(pgid):
        return 1
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return 1
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(POLL_S)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return 1


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), float(sys.argv[2])))
