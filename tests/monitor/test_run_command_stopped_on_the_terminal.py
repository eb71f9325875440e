"""A command under `gpuwise run` is not in the terminal's foreground: reading the terminal stops it (SIGTTIN).
It used to wait there for ever, silently, holding the rented GPU; gpuwise now says why it is stopped. And a
stop signal passed on to a stopped command stayed pending until the SIGKILL after the grace period: gpuwise now
continues the group after passing one on, so the command's own handler runs. Real terminals (a pty), real
processes, real signals."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time

from gpuwise.monitor.log_meta import PID_KEY
from gpuwise.monitor.runner import KILL_EVENT
from gpuwise.runlog import read_events, read_meta

PY = sys.executable
DEADLINE_S = 90.0        # generous: on a loaded machine a Python start alone may take seconds
KILL_AFTER_S = "600"     # a SIGKILL after the grace period cannot be mistaken for the command's own end

ASKS = "import sys; print('ready', flush=True); answer = input(); print('got', answer)"


def _read_pty_until(fd: int, wanted: bytes, deadline_s: float) -> bytes:
    """What the terminal showed, up to ``wanted`` or the deadline (or the terminal's end)."""
    seen = b""
    end_s = time.monotonic() + deadline_s
    while wanted not in seen and time.monotonic() < end_s:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:   # the terminal's other end closed: gpuwise ended
            break
        if not chunk:
            break
        seen += chunk
    return seen


def _exit_code_within(pid: int, deadline_s: float) -> int | None:
    end_s = time.monotonic() + deadline_s
    while time.monotonic() < end_s:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.1)
    return None


def _gpuwise_on_a_terminal(args: list[str], env: dict) -> tuple[int, int]:
    """gpuwise started on a new terminal (a pty: it is in the terminal's foreground, as from a shell)."""
    pid, fd = pty.fork()
    if pid == 0:   # the child: never back into the test (whose cleanup would kill process group 0, pytest's own)
        try:
            os.execve(PY, [PY, "-m", "gpuwise.cli.app", *args], env)
        finally:
            os._exit(127)
    return pid, fd


def test_a_command_reading_the_terminal_is_said_to_be_stopped(tmp_path, replay_env):
    """The warning only: what a stopped command does once a stop signal reaches it is the next test's (a SIGSTOP,
    no terminal). A Ctrl-C taken just before the terminal stops the command is test_run_signal_taken_before_a_
    terminal_stop's."""
    log = tmp_path / "asks.db"
    pid, fd = _gpuwise_on_a_terminal(["run", "--log", str(log), "--interval", "0.2", "--kill-after", KILL_AFTER_S,
                                      "--", PY, "-c", ASKS], replay_env)
    try:
        shown = _read_pty_until(fd, b"Ctrl-C stops it", DEADLINE_S)
    finally:
        os.kill(pid, signal.SIGKILL)                # gpuwise, and by its watchdog the command
        os.waitpid(pid, 0)
        os.close(fd)
    assert b"the command is stopped (SIGTTIN): it read from the terminal" in shown, shown.decode(errors="replace")


def test_a_stop_signal_reaches_a_command_that_is_stopped(tmp_path, replay_env):
    done = tmp_path / "handled"
    stops_itself = textwrap.dedent(f"""
        import os, signal, sys
        def handled(signum, frame):
            open({str(done)!r}, "w").write(signal.Signals(signum).name)
            sys.exit(7)
        signal.signal(signal.SIGTERM, handled)
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)   # as Ctrl-Z or a debugger would leave it
        signal.pause()
    """)
    log = tmp_path / "stopped.db"
    proc = subprocess.Popen([PY, "-m", "gpuwise.cli.app", "run", "--log", str(log), "--interval", "0.2",
                             "--kill-after", KILL_AFTER_S, "--", PY, "-c", stops_itself],
                            env=replay_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        command_pid = _command_pid(log)
        assert _stopped_within(command_pid, DEADLINE_S)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert done.read_text() == "SIGTERM", stderr
    assert proc.returncode == 7, stderr
    assert not [e for e in read_events(log) if e["kind"] == KILL_EVENT]


def _command_pid(log) -> int:
    end_s = time.monotonic() + DEADLINE_S
    while time.monotonic() < end_s:
        pid = read_meta(log).get(PID_KEY)
        if pid:
            return int(pid)
        time.sleep(0.1)
    raise AssertionError("the run log never recorded the command's pid")


def _stopped_within(pid: int, deadline_s: float) -> bool:
    end_s = time.monotonic() + deadline_s
    while time.monotonic() < end_s:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return True
        time.sleep(0.1)
    return False
