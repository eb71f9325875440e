"""`gpuwise run` never leaves its command behind: a SIGKILLed gpuwise takes the command's whole process
group with it (PR_SET_PDEATHSIG and the watchdog), and a command ignoring SIGTERM gets SIGKILL after the
grace period, said on stderr and in the run log. Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from gpuwise.runlog import read_events

PY = sys.executable

# The command starts a grandchild (as torchrun starts workers); both write their PIDs, then sleep.
# With "stubborn" both ignore SIGTERM.
FAMILY = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    out = sys.argv[1]; stubborn = "stubborn" in sys.argv
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "grand" in sys.argv:   # written whole, then renamed: the child waits for the name, never reads it empty
        open(out + ".grandchild.tmp", "w").write(str(os.getpid()))
        os.replace(out + ".grandchild.tmp", out + ".grandchild")
        time.sleep(120)
    else:
        subprocess.Popen([sys.executable, __file__, out, "grand"] + (["stubborn"] if stubborn else []))
        while not os.path.exists(out + ".grandchild"):
            time.sleep(0.01)
        open(out + ".child", "w").write(str(os.getpid()))
        print("ready", flush=True)
        time.sleep(120)
""")


def _env() -> dict:
    env = dict(os.environ)
    env.pop("GPUWISE_MONITOR_BACKEND", None)   # no driver: the command runs unsampled
    return env


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not reaped yet by whoever adopted it) is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _start(tmp_path, *run_args: str, stubborn: bool = False) -> subprocess.Popen:
    script = tmp_path / "family.py"
    script.write_text(FAMILY)
    cmd = [PY, "-m", "gpuwise.cli.app", "run", "--log", str(tmp_path / "run.db"), *run_args, "--",
           PY, str(script), str(tmp_path / "pid")] + (["stubborn"] if stubborn else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.poll() is not None else ""
    return proc


def _family(tmp_path) -> list[int]:
    return [int((tmp_path / f"pid.{who}").read_text()) for who in ("child", "grandchild")]


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_sigkilled_run_takes_its_command_and_the_grandchildren_with_it(tmp_path):
    proc = _start(tmp_path, "--kill-after", "2")
    pids = _family(tmp_path)
    try:
        assert all(_alive(p) for p in pids)
        proc.kill()   # SIGKILL to gpuwise only: nothing it can catch
        proc.wait(timeout=60)
        assert _gone_within(pids, 60), "the command or its worker ran on after gpuwise was killed"
    finally:
        _cleanup(pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_sigkilled_run_stops_a_command_that_ignores_sigterm_after_the_grace_period(tmp_path):
    proc = _start(tmp_path, "--kill-after", "4", stubborn=True)   # a grace wide enough for a loaded machine
    pids = _family(tmp_path)
    try:
        proc.kill()
        proc.wait(timeout=60)
        time.sleep(0.5)
        assert all(_alive(p) for p in pids), "SIGKILL came before the grace period"
        assert _gone_within(pids, 60)
    finally:
        _cleanup(pids)


def test_a_command_ignoring_sigterm_gets_sigkill_after_the_grace_period_and_it_is_said(tmp_path):
    proc = _start(tmp_path, "--kill-after", "1", stubborn=True)
    pids = _family(tmp_path)
    try:
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=110)
        waited_s = time.monotonic() - start
    finally:
        _cleanup(pids)
    assert proc.returncode == 128 + signal.SIGKILL, err
    # at least the grace period; the upper bound, generous for a loaded machine, is well short of the
    # command's own 120 s sleep (a gpuwise that never sent SIGKILL)
    assert 1 <= waited_s < 60
    assert "SIGKILL" in err and "1 s after SIGTERM" in err and "Traceback" not in err
    assert _gone_within(pids, 60)   # the grandchild too: the group got it
    kills = [e for e in read_events(tmp_path / "run.db") if e["kind"] == "kill"]
    assert len(kills) == 1 and "SIGTERM" in kills[0]["message"]


def test_a_command_that_stops_on_sigterm_is_not_killed(tmp_path):
    proc = _start(tmp_path, "--kill-after", "30")
    pids = _family(tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        _cleanup(pids)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "SIGKILL" not in err
    assert not [e for e in read_events(tmp_path / "run.db") if e["kind"] == "kill"]


def test_a_normal_end_leaves_no_watchdog_and_no_kill(tmp_path):
    r = subprocess.run([PY, "-m", "gpuwise.cli.app", "run", "--log", str(tmp_path / "r.db"), "--", PY, "-c",
                        "import os; print(os.getppid())"], capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    children = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(os.getpid())], capture_output=True, text=True)
    assert "orphan_watch" not in children.stdout


def test_a_negative_grace_period_is_bad_input(tmp_path):
    r = subprocess.run([PY, "-m", "gpuwise.cli.app", "run", "--log", str(tmp_path / "r.db"), "--kill-after", "-1",
                        "--", PY, "-c", "pass"], capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


# The trial's repro: the command traps SIGTERM and exits 7 at once; its worker (same process group) ignores
# SIGTERM and would sleep on, holding the GPU, after the command itself has ended.
TREE = textwrap.dedent("""\
    #!/bin/bash
    trap 'exit 7' TERM
    "$1" -c "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); \\
    open('$2', 'w').write(str(os.getpid())); time.sleep(300)" &
    wait
""")


def test_a_worker_ignoring_sigterm_is_killed_after_the_grace_period_though_the_command_has_ended(tmp_path):
    # the defect: gpuwise ended with its direct child and never sent the promised SIGKILL to the group
    script = tmp_path / "tree.sh"
    script.write_text(TREE)
    script.chmod(0o755)
    worker_pid_file = tmp_path / "worker.pid"
    proc = subprocess.Popen([PY, "-m", "gpuwise.cli.app", "run", "--log", str(tmp_path / "tree.db"), "--interval",
                             "0.2", "--kill-after", "2", "--", str(script), PY, str(worker_pid_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not worker_pid_file.exists() or not worker_pid_file.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    worker = int(worker_pid_file.read_text())
    try:
        time.sleep(0.3)
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        waited_s = time.monotonic() - start
        assert _gone_within([worker], 60), "the worker that ignores SIGTERM ran on after gpuwise ended"
    finally:
        _cleanup([worker])
    assert proc.returncode == 7, err            # the command's own exit code, not 137
    assert 2 <= waited_s < 60                    # the grace period was given to the worker (its sleep is 300 s)
    assert "SIGKILL" in err and "2 s after SIGTERM" in err and "Traceback" not in err
    kills = [e for e in read_events(tmp_path / "tree.db") if e["kind"] == "kill"]
    assert len(kills) == 1 and "SIGTERM" in kills[0]["message"]


def test_a_command_whose_whole_group_stops_on_sigterm_ends_at_once_without_a_kill(tmp_path):
    # waiting for the group must not turn into waiting out the grace period when nothing is left
    # a grace period far longer than a loaded machine takes to end the group: ending "at once" is well short of it
    proc = _start(tmp_path, "--kill-after", "150")
    pids = _family(tmp_path)
    try:
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=200)
        waited_s = time.monotonic() - start
    finally:
        _cleanup(pids)
    assert proc.returncode == 128 + signal.SIGTERM and waited_s < 60, err
    assert not [e for e in read_events(tmp_path / "run.db") if e["kind"] == "kill"]
