"""One run per checkpoint directory: a second live process is refused before it writes or prunes anything;
a dead one (SIGKILL, preemption) never blocks the restart.

Before, two runs on one directory overwrote each other silently: one resumed from the other's checkpoint at
another batch size, and its prune deleted the other's final step.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from gpuwise.guard import Guard, GuardError

from .helpers import example_env

HOLDER = textwrap.dedent("""
    import sys, torch
    from gpuwise.guard import Guard
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    guard = Guard(sys.argv[1], model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=1, keep=1)
    guard.step(torch.randn(2, 4), lambda b: model(b).pow(2).mean())
    guard.wait_for_save()
    print("ready", flush=True)
    sys.stdin.readline()   # holds the directory until told (or killed)
    guard.close()
""")


def _guard(directory: Path, **kwargs) -> Guard:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False, **kwargs)


def _start_holder(directory: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=example_env())
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise AssertionError(proc.stderr.read()[-2000:])
    return proc


def _listing(directory: Path) -> dict[str, float]:
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in directory.rglob("*")}


def test_a_second_live_run_is_refused_naming_the_other_process(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    holder = _start_holder(ck)
    try:
        before = _listing(ck)
        with pytest.raises(GuardError) as info:
            _guard(ck, every_steps=1, keep=1, run_log=tmp_path / "B.db")
        message = str(info.value)
        assert "\n" not in message
        assert str(ck) in message and f"pid {holder.pid}" in message and socket.gethostname() in message
        assert _listing(ck) == before          # nothing written, nothing pruned
        assert not (tmp_path / "B.db").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert holder.returncode == 0, holder.stderr.read()[-2000:]
    # the holder ended: the directory is free, and the run resumes from its checkpoint
    guard = _guard(ck, every_steps=1, keep=1)
    assert guard.resume().step == 1
    guard.close()


def test_a_killed_owner_never_blocks_the_restart(tmp_path: Path) -> None:
    from gpuwise.guard import dirlock

    ck = tmp_path / "ck"
    holder = _start_holder(ck)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    owner = dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text())
    assert owner is not None and owner.pid == holder.pid   # the dead run's record is still there
    guard = _guard(ck, every_steps=1, keep=1)
    assert guard.resume().step == 1
    assert dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text()).pid == os.getpid()
    guard.close()


def test_the_same_process_may_open_its_directory_twice(tmp_path: Path) -> None:
    first = _guard(tmp_path / "ck")
    second = _guard(tmp_path / "ck")   # a notebook cell run again: the same run
    second.close()
    first.close()


def test_a_forked_child_does_not_keep_the_directory(tmp_path: Path) -> None:
    """A DataLoader worker (forked) inherits the descriptor; the lock must end with this process's Guard."""
    from gpuwise.guard import dirlock

    guard = _guard(tmp_path / "ck")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: alive, holding whatever it inherited (the fork's hooks have run by now)
        os.write(write_end, b"x")
        time.sleep(30)
        os._exit(0)
    try:
        assert os.read(read_end, 1) == b"x"
        guard.close()
        fd = os.open(tmp_path / "ck" / dirlock.LOCK_FILE, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # another process would get it now
        finally:
            os.close(fd)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
        os.close(write_end)


def test_a_lock_held_for_an_owner_that_is_gone_does_not_block(tmp_path: Path, caplog) -> None:
    """An orphan that inherited the lock of a run that died: the record names a dead pid on this host."""
    from gpuwise.guard import dirlock

    ck = tmp_path / "ck"
    ck.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    me = dirlock.Owner.me()
    record = dirlock.Owner(int(dead), me.host, me.pid_namespace, time.time() - 60)
    fd = os.open(ck / dirlock.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, record.to_text().encode())
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # held through another open file description
        with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
            guard = _guard(ck)
        assert f"pid {dead}" in caplog.text and "gone" in caplog.text
        guard.close()
    finally:
        os.close(fd)


def test_a_file_system_without_locks_warns_and_goes_on(tmp_path: Path, monkeypatch, caplog) -> None:
    from gpuwise.guard import dirlock

    import errno

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(dirlock.fcntl, "flock", no_locks)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        guard = _guard(tmp_path / "ck", every_steps=1)
    assert "does not lock files" in caplog.text
    guard.step(torch.randn(2, 4), lambda b: guard.model(b).pow(2).mean())
    guard.close()
    assert (tmp_path / "ck" / "step-000000001").is_dir()


def test_the_lock_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    from gpuwise.guard import dirlock

    guard = _guard(tmp_path / "ck", every_steps=1, keep=1)
    for _ in range(3):
        guard.step(torch.randn(2, 4), lambda b: guard.model(b).pow(2).mean())
    guard.close()
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert names == [dirlock.LOCK_FILE, "step-000000003"]
    assert json.loads((tmp_path / "ck" / dirlock.LOCK_FILE).read_text())["pid"] == os.getpid()
