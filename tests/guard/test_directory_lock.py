"""One run per checkpoint directory: a second live process is refused before it writes or prunes anything;
a dead one (SIGKILL, preemption) never blocks the restart, and neither do a run that is still ending (waited
for), an earlier attempt of the same torchrun run (stuck in the kernel, given up on by its agent), nor another
host's lock on a network file system (a preempted VM's lock outlives it on the server).

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


@pytest.fixture(autouse=True)
def short_wait(monkeypatch):
    """A held directory is waited for (30 s by default) before the refusal: a short wait in these tests."""
    from gpuwise.guard import dirlock

    monkeypatch.setattr(dirlock, "WAIT_S", 0.3, raising=False)
    monkeypatch.setattr(dirlock, "POLL_S", 0.05, raising=False)


def _guard(directory: Path, **kwargs) -> Guard:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    return Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False, **kwargs)


def _start_holder(directory: Path, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(directory)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**example_env(), **env})
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
        # where the lock is, and how to go on when its owner is gone but the lock outlived it
        assert f"lock {ck / '.gpuwise-lock'}" in message and "Guard(lock_directory=False)" in message
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
        # the file names the run that went on (a third run is refused naming it), and it is still this
        # process's directory: a second Guard of it shares it
        assert dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text()).pid == os.getpid()
        _guard(ck).close()
        guard.close()
    finally:
        os.close(fd)


def test_a_run_that_went_on_past_a_held_lock_takes_it_when_it_is_let_go(tmp_path: Path, caplog) -> None:
    """The run went on past a lock held for a process that cannot write; once that lock is let go, a later run
    must not find it free (it would never read the file that names this live run, and write the same directory)."""
    from gpuwise.guard import dirlock

    ck = tmp_path / "ck"
    ck.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    me = dirlock.Owner.me()
    fd = os.open(ck / dirlock.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    os.write(fd, dirlock.Owner(int(dead), me.host, me.pid_namespace, time.time() - 60).to_text().encode())
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with caplog.at_level(logging.INFO, logger="gpuwise.guard"):
        guard = _guard(ck)
        os.close(fd)   # the orphan that held it ends
        later = os.open(ck / dirlock.LOCK_FILE, os.O_RDWR)   # a later run's own open file description
        try:
            deadline = time.monotonic() + 120
            while "this run's now" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.02)
            with pytest.raises(BlockingIOError):
                fcntl.flock(later, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text()).pid == os.getpid()
            guard.close()
            fcntl.flock(later, fcntl.LOCK_EX | fcntl.LOCK_NB)   # let go with the run
        finally:
            os.close(later)


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


def test_a_run_that_is_still_ending_is_waited_for(tmp_path: Path, monkeypatch, caplog) -> None:
    """A replacement (a k8s pod on a shared volume, a Slurm requeue) may start while the old process still exits."""
    from gpuwise.guard import dirlock

    ck = tmp_path / "ck"
    holder = _start_holder(ck)
    monkeypatch.setattr(dirlock, "WAIT_S", 120.0, raising=False)

    class EndTheOldRunOnceWaiting(logging.Handler):
        """The old run ends once this one has started waiting for it (not after a fixed second, which a loaded
        machine could spend before the wait began: then there was nothing to wait for)."""

        def emit(self, record: logging.LogRecord) -> None:
            if "waiting up to" in record.getMessage() and not holder.stdin.closed:
                holder.stdin.close()

    ending = EndTheOldRunOnceWaiting()
    logging.getLogger("gpuwise.guard").addHandler(ending)
    try:
        with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
            guard = _guard(ck, every_steps=1, keep=1)
    finally:
        logging.getLogger("gpuwise.guard").removeHandler(ending)
        if not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(timeout=120)
    assert holder.returncode == 0, holder.stderr.read()[-2000:]
    waits = [r.getMessage() for r in caplog.records if "waiting up to 120 s" in r.getMessage()]
    assert len(waits) == 1 and f"pid {holder.pid}" in waits[0]   # said once, naming whom it waits for
    assert guard.resume().step == 1
    guard.close()


def test_an_earlier_attempt_of_this_torchrun_run_does_not_block(tmp_path: Path, monkeypatch, caplog) -> None:
    """torchrun's agent restarts the workers even when one survived SIGKILL (stuck in a hung collective, D state):
    that stuck rank 0 still holds the lock, and must not refuse every restart until --max-restarts runs out."""
    from gpuwise.guard import dirlock

    ck = tmp_path / "ck"
    holder = _start_holder(ck, TORCHELASTIC_RUN_ID="job-7", TORCHELASTIC_RESTART_COUNT="0")
    try:
        recorded = dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text())
        assert (recorded.run_id, recorded.restart) == ("job-7", 0)
        # not an earlier attempt of this run: refused
        for run_id, restart in [("job-8", "1"), ("job-7", "0"), ("none", "1")]:   # "none": torchrun's default
            monkeypatch.setenv("TORCHELASTIC_RUN_ID", run_id)
            monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", restart)
            with pytest.raises(GuardError, match=f"pid {holder.pid} .*torchrun run job-7 restart 0"):
                _guard(ck)
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-7")
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
        with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
            guard = _guard(ck, every_steps=1, keep=1)
        assert f"pid {holder.pid}" in caplog.text and "earlier attempt of this torchrun run" in caplog.text
        now = dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text())
        assert (now.pid, now.run_id, now.restart) == (os.getpid(), "job-7", 1)
        assert guard.resume().step == 1
        guard.close()
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_another_hosts_lock_on_a_network_file_system_does_not_block(tmp_path: Path, monkeypatch, caplog) -> None:
    """A preempted VM's lock stays on the NFS server (a lease of ~90 s on NFSv4, until that client reboots on
    NFSv3): the restart on a new VM goes on with a warning. On this host, or on a local disk, it is refused."""
    from gpuwise.guard import dirlock

    ck = tmp_path / "ck"
    holder = _start_holder(ck)
    try:
        mine = dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text())
        other = dirlock.Owner(4242, "preempted-vm", "", mine.started_t_s)
        (ck / dirlock.LOCK_FILE).write_text(other.to_text())   # the lock stays the holder's
        with pytest.raises(GuardError, match="preempted-vm"):
            _guard(ck)   # a local file system: the other host's process would hold no lock here
        monkeypatch.setattr(dirlock, "is_network_fs", lambda path: True, raising=False)
        with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
            guard = _guard(ck)
        assert "pid 4242 on host preempted-vm" in caplog.text and "cannot be verified across hosts" in caplog.text
        guard.close()
        (ck / dirlock.LOCK_FILE).write_text(mine.to_text())
        with pytest.raises(GuardError, match=f"pid {holder.pid}"):
            _guard(ck)   # this host's live process, network file system or not
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_lock_directory_false_takes_and_checks_no_lock(tmp_path: Path) -> None:
    from gpuwise.guard import dirlock

    ck = tmp_path / "ck"
    holder = _start_holder(ck)
    try:
        guard = _guard(ck, every_steps=1, keep=2, lock_directory=False)   # the person says the owner is gone
        assert guard.resume().step == 1
        guard.step(torch.randn(2, 4), lambda b: guard.model(b).pow(2).mean())
        guard.close()
        assert dirlock.Owner.from_text((ck / dirlock.LOCK_FILE).read_text()).pid == holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with pytest.raises(GuardError, match="^lock_directory must be True or False, got 'no'$"):
        _guard(tmp_path / "other", lock_directory="no")
    assert not (tmp_path / "other").exists()
