"""A Ctrl-C that reaches a command just before the terminal stops it. Python takes a SIGINT at once (its C
handler) and acts on it at its next bytecode; when a read of the terminal comes in between, the command is
stopped there (SIGTTIN), and the SIGCONT gpuwise sent after the SIGINT has already come and gone: nothing
continued it, and a bare SIGCONT would only restart the read, to be stopped again. It waited for the grace
period's SIGKILL (about one Ctrl-C in twenty under load; reproduced with Ctrl-C sent as the command began to
read). gpuwise now passes the signal on once more (with SIGCONT) when its command stops on the terminal after
one was passed on, and only then: a stop it saw before passing one on is over once that SIGCONT is sent.

The command blocks the signals it takes, so what reached it is kernel state (``sigpending``), not timing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import gpuwise.monitor.runner as runner
from gpuwise.monitor.log_meta import PID_KEY
from gpuwise.monitor.runner import KILL_EVENT, SIGNALS_EVENT, run_command
from gpuwise.runlog import read_events, read_meta

PY = sys.executable
DEADLINE_S = 90.0         # generous: on a loaded machine a Python start alone may take seconds
KILL_AFTER_S = "600"      # a SIGKILL after the grace period cannot be mistaken for the command's own end

# Takes gpuwise's SIGINT and the SIGCONT after it, then stops on the terminal before it acts on the SIGINT (a
# self-sent SIGTTIN, as the terminal sends one to a background reader; continued without a new signal, it stops
# there again, as a restarted read would). Exits 5 once a SIGINT reaches it while it is stopped there.
TAKES_SIGINT_THEN_STOPS = textwrap.dedent("""
    import os, signal, sys
    taken = {signal.SIGINT, signal.SIGCONT}
    signal.pthread_sigmask(signal.SIG_BLOCK, taken)
    open(sys.argv[1], "w").close()
    seen = set()
    while seen != taken:
        seen.add(signal.sigwait(taken))
    while signal.SIGINT not in signal.sigpending():
        os.kill(os.getpid(), signal.SIGTTIN)
    sys.exit(5)
""")

# Stopped on the terminal before any signal reaches it; ends by the SIGINT gpuwise passes on.
STOPS_ON_THE_TERMINAL = "import os, signal, sys; open(sys.argv[1], 'w').close(); os.kill(os.getpid(), signal.SIGTTIN)"


def _wait_for_file(path, deadline_s: float = DEADLINE_S) -> None:
    end_s = time.monotonic() + deadline_s
    while not path.exists():
        assert time.monotonic() < end_s, f"{path.name} never appeared"
        time.sleep(0.05)


def _kill_command(log) -> None:
    pid = read_meta(log).get(PID_KEY) if log.exists() else None
    if pid:
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_sigint_taken_just_before_a_terminal_stop_is_passed_on_again_and_ends_the_command(tmp_path, replay_env):
    ready, log = tmp_path / "ready", tmp_path / "run.db"
    proc = subprocess.Popen([PY, "-m", "gpuwise.cli.app", "run", "--log", str(log), "--interval", "0.2",
                             "--kill-after", KILL_AFTER_S, "--", PY, "-c", TAKES_SIGINT_THEN_STOPS, str(ready)],
                            env=replay_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_file(ready)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=DEADLINE_S)    # before: stopped until the SIGKILL 600 s later
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
            _kill_command(log)
    assert proc.returncode == 5, stderr
    events = read_events(log)
    assert not [e for e in events if e["kind"] == KILL_EVENT], stderr
    # passed on once by the user's Ctrl-C; the repeat is no second signal of theirs
    assert [e["message"] for e in events if e["kind"] == SIGNALS_EVENT] == ['["SIGINT"]']


def test_a_stop_seen_before_a_signal_is_passed_on_does_not_get_it_twice(tmp_path, monkeypatch, replay_env):
    """The window: gpuwise has taken the command's stop when the Ctrl-C's handler runs (it passes SIGINT on and
    continues the command); that stop is over, and the command must not get the SIGINT a second time (a second
    Ctrl-C to a Python job interrupts its cleanup). The handler is run at that point explicitly."""
    monkeypatch.setenv("GPUWISE_MONITOR_BACKEND", replay_env["GPUWISE_MONITOR_BACKEND"])
    ready = tmp_path / "ready"
    take_stop = runner._take_stop
    sent_to_group: list[int] = []
    signal_group = runner._Forwarder._signal_group

    def take_stop_then_ctrl_c(child):
        take_stop(child)
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)   # gpuwise's handler, as a Ctrl-C runs it here

    def recorded(forwarder, signum):
        sent_to_group.append(signum)
        signal_group(forwarder, signum)

    monkeypatch.setattr(runner, "_take_stop", take_stop_then_ctrl_c)
    monkeypatch.setattr(runner._Forwarder, "_signal_group", recorded)
    result = run_command([PY, "-c", STOPS_ON_THE_TERMINAL, str(ready)], log_path=tmp_path / "run.db",
                         announce=False, kill_after_s=float(KILL_AFTER_S))
    assert ready.exists()
    assert result.signal == "SIGINT" and result.killed is None
    assert sent_to_group == [signal.SIGINT]
