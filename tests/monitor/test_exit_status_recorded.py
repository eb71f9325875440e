"""`gpuwise run` records how its command ended in the run log's meta: ``exit_code`` as a shell gives it, and
``signal`` (the signal's name) only when a signal ended the command, so a report can tell a command killed by
SIGKILL from one that exited with code 137 itself (trial 2: the report of a crashed run never said it failed)."""

from __future__ import annotations

import os
import signal
import sys

from gpuwise.monitor.runner import exit_status
from gpuwise.runlog import read_meta

from monitor_fakes import gpuwise

PY = sys.executable


def _no_driver_env() -> dict:
    env = dict(os.environ)
    env.pop("GPUWISE_MONITOR_BACKEND", None)
    return env


def test_a_command_killed_by_a_signal_leaves_the_signal_name_beside_its_exit_code(tmp_path):
    log = tmp_path / "killed.db"
    r = gpuwise("run", "--log", str(log), "--", PY, "-c", "import os; os.kill(os.getpid(), 9)", env=_no_driver_env())
    assert r.returncode == 128 + signal.SIGKILL
    meta = read_meta(log)
    assert meta["exit_code"] == str(128 + signal.SIGKILL) and meta["signal"] == "SIGKILL"


def test_a_command_that_exits_137_itself_records_no_signal(tmp_path):
    log = tmp_path / "exited.db"
    r = gpuwise("run", "--log", str(log), "--", PY, "-c", "raise SystemExit(137)", env=_no_driver_env())
    assert r.returncode == 137
    meta = read_meta(log)
    assert meta["exit_code"] == "137" and "signal" not in meta


def test_exit_status_is_the_shell_code_and_names_the_signal_only_for_a_signal():
    assert exit_status(0) == {"exit_code": 0}
    assert exit_status(3) == {"exit_code": 3}
    assert exit_status(-signal.SIGTERM) == {"exit_code": 128 + signal.SIGTERM, "signal": "SIGTERM"}
