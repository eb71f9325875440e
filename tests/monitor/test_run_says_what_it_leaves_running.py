"""`gpuwise run` says when its command ends but processes of its group run on (a script that starts
`python train.py &` and exits): they are neither sampled nor stopped, and may hold a rented GPU, so a warning,
a ``left_running`` event in the run log and ``left_running`` in ``--json`` say so (trial 4: they were left
silently, the report covering only the seconds the script ran). ``--json`` also carries the ``signal`` that
ended the command, as the run log's meta does, and a bad ``--kill-after`` names the option. Real processes."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from gpuwise.monitor.backend import MonitorError
from gpuwise.monitor.runner import run_command
from gpuwise.runlog import read_events

from monitor_fakes import gpuwise

PY = sys.executable
# The command starts a worker in its own process group and exits without waiting for it (the worker's
# output away from gpuwise's pipes, which the test reads to their end).
LEAVES_A_WORKER = ("import subprocess, sys; w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
                   "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(w.pid)")


def _no_driver_env() -> dict:
    env = dict(os.environ)
    env.pop("GPUWISE_MONITOR_BACKEND", None)
    return env


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_worker_left_running_after_the_command_ends_is_said_in_json_stderr_and_the_run_log(tmp_path):
    log = tmp_path / "left.db"
    r = gpuwise("run", "--log", str(log), "--json", "--", PY, "-c", LEAVES_A_WORKER, env=_no_driver_env())
    worker = next(int(line) for line in r.stderr.splitlines() if line.isdigit())   # --json: its stdout on stderr
    try:
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["left_running"] == [worker]
        assert f"still run after it ended (pid {worker})" in r.stderr
        assert [e["kind"] for e in read_events(log)].count("left_running") == 1
    finally:
        _stop(worker)


def test_a_command_that_waits_for_its_workers_leaves_nothing_running(tmp_path):
    log = tmp_path / "clean.db"
    result = run_command([PY, "-c", LEAVES_A_WORKER.replace("time.sleep(60)", "pass") + "; w.wait()"],
                         log_path=log, announce=False, child_stdout=open(os.devnull, "w"))
    assert result.exit_code == 0 and result.left_running == []
    assert "left_running" not in [e["kind"] for e in read_events(log)]


@pytest.mark.parametrize(("code", "signal_name"), [("import os; os.kill(os.getpid(), 9)", "SIGKILL"),
                                                   ("raise SystemExit(137)", None)])
def test_json_names_the_signal_that_ended_the_command(tmp_path, code, signal_name):
    r = gpuwise("run", "--log", str(tmp_path / "s.db"), "--json", "--", PY, "-c", code, env=_no_driver_env())
    out = json.loads(r.stdout)
    assert (r.returncode, out["exit_code"], out["signal"]) == (137, 137, signal_name)


def test_a_negative_kill_after_is_refused_naming_the_option(tmp_path):
    with pytest.raises(MonitorError, match="^--kill-after: "):
        run_command(["true"], log_path=tmp_path / "k.db", kill_after_s=-1, announce=False)
