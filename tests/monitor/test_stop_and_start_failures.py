"""How `watch` and `exporter` stop and fail to start: a stop signal from the moment the run log exists ends them
with the log's end written (the exporter printed its URL before its handlers were in, and a SIGTERM right after
killed it: exit -15, no ``end_t_s``); the stop handler takes no lock (it took the Event's, which the main thread
may hold inside ``Event.wait``: a deadlock); a `watch --log` that fails before its first view leaves no log
behind, as the exporter leaves none. Real subprocesses, real signals (sent at a chosen point of the run by the
process to itself), real SQLite; the GPU replayed."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import textwrap

import pytest

from gpuwise.runlog import read_meta

from monitor_fakes import gpuwise

PY = sys.executable

# Runs a gpuwise command that sends itself SIGTERM at one point: "log" just after its run log is created,
# "serving" just after the exporter's "serving" line reached stdout (when a caller reading it could send one).
TERM_AT = textwrap.dedent("""
    import os, signal, sys

    import gpuwise.monitor.sampler as sampler_module

    point = sys.argv[1]

    def term():
        os.kill(os.getpid(), signal.SIGTERM)

    if point == "log":
        create = sampler_module.create_new_log

        def create_then_term(path):
            claim = create(path)
            term()
            return claim

        sampler_module.create_new_log = create_then_term
    else:
        class TermAfterServing:
            def __init__(self, out):
                self.out, self.seen = out, ""

            def write(self, text):
                self.seen += text
                return self.out.write(text)

            def flush(self):
                self.out.flush()
                if "serving" in self.seen:
                    self.seen = ""
                    term()

            def __getattr__(self, name):
                return getattr(self.out, name)

        sys.stdout = TermAfterServing(sys.stdout)

    from gpuwise.cli.app import main

    main(sys.argv[2:])
""")


@pytest.mark.parametrize(("point", "argv"), [
    ("log", ["watch", "--interval", "0.1"]),
    ("log", ["exporter", "--port", "0", "--interval", "0.1"]),
    ("serving", ["exporter", "--port", "0", "--interval", "0.1"]),
])
def test_a_sigterm_from_the_moment_the_log_exists_ends_watch_and_exporter_with_the_log_complete(
        tmp_path, replay_env, point, argv):
    script = tmp_path / "term_at.py"
    script.write_text(TERM_AT)
    log = tmp_path / "m.db"
    r = subprocess.run([PY, str(script), point, *argv, "--log", str(log)], capture_output=True, text=True,
                       env=replay_env, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr)     # before: -15, killed by the SIGTERM
    meta = read_meta(log)
    assert float(meta["end_t_s"]) >= float(meta["start_t_s"])


# Waits, many times over, with a zero timeout (as watch's loop does when sampling is behind) until SIGUSR1
# stops it; says "ready" before each wait.
WAITER = textwrap.dedent("""
    import signal, sys

    from gpuwise.monitor.stop_signals import stop_on_signals

    for _ in range(int(sys.argv[1])):
        with stop_on_signals([signal.SIGUSR1]) as stop:
            print("ready", flush=True)
            while not stop.is_set():
                stop.wait(0)
    print("done", flush=True)
""")


def test_a_stop_signal_never_deadlocks_the_wait():
    rounds = 2000         # before: a deadlock within the first few hundred rounds
    proc = subprocess.Popen([PY, "-c", WAITER, str(rounds)], stdout=subprocess.PIPE, bufsize=0)
    try:
        for k in range(rounds):
            ready, _, _ = select.select([proc.stdout], [], [], 60)     # a hang, not slowness, fails this
            assert ready, f"no answer to signal {k}: the handler deadlocked"
            assert proc.stdout.readline() == b"ready\n"
            proc.send_signal(signal.SIGUSR1)
        assert proc.stdout.readline() == b"done\n"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("json_out", [False, True])
def test_a_watch_that_fails_before_its_first_view_leaves_no_log(tmp_path, replay_env, json_out):
    log = tmp_path / "w.db"
    args = ["watch", "--log", str(log), "--gpu", "7", "--interval", "0.1", "--count", "1"]
    r = gpuwise(*args, *(["--json"] if json_out else []), env=replay_env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--gpu 7: no such GPU here" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames.json"]     # no log, nothing of it left
    # the next try with the same --log is not refused as "already exists"
    r = gpuwise("watch", "--log", str(log), "--interval", "0.1", "--count", "1", env=replay_env)
    assert r.returncode == 0, r.stderr
