"""A run log holds one run: `gpuwise run` never writes a second run into a log (a new user's trial).

Before: two `gpuwise run` calls without --log in the same second both wrote `gpuwise-run-YYYYmmdd-HHMMSS.db`
(the second's command with the first's exit code, start after end, both runs' events mixed), and `--log
run2.sqlite` naming an earlier run's log kept that run's `workload` meta, so report/calibrate compared the new
run with the wrong prediction.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.runner import default_log_path
from gpuwise.runlog import RunLog, read_events, read_meta

from monitor_fakes import gpuwise

PY = sys.executable


def no_driver_env() -> dict:
    env = dict(os.environ)
    env.pop("GPUWISE_MONITOR_BACKEND", None)
    return env


def _earlier_run(path, command: str) -> None:
    with RunLog(path) as log:
        log.set_meta("command", [command])
        log.set_meta("exit_code", 0)
        log.set_meta("workload", {"model": "hf:earlier/model"})
        log.log_event("exit", "exit code 0")


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_runs_started_in_the_same_second_without_log_get_a_log_each(tmp_path):
    # every name the next minute could give is taken by an earlier run: the trial's collision, made certain
    now = time.time()
    taken = {tmp_path / f"gpuwise-run-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now + dt))}.db"
             for dt in range(-1, 60)}
    for path in taken:
        _earlier_run(path, "earlier")
    before = {p: _digest(p) for p in taken}

    first = gpuwise("run", "--json", "--", PY, "-c", "import sys; sys.exit(3)", env=no_driver_env(), cwd=tmp_path)
    second = gpuwise("run", "--", "nonexistent_cmd_xyz", env=no_driver_env(), cwd=tmp_path)
    assert (first.returncode, second.returncode) == (3, 127), first.stderr + second.stderr
    first_log = tmp_path / json.loads(first.stdout)["log"]
    new = sorted(set(tmp_path.glob("gpuwise-run-*.db")) - taken)
    assert len(new) == 2 and first_log in new, new
    (second_log,) = [p for p in new if p != first_log]
    assert second_log.name in second.stderr
    assert {p: _digest(p) for p in taken} == before                      # the earlier runs' logs untouched

    one, two = read_meta(first_log), read_meta(second_log)
    assert json.loads(one["command"])[-1] == "import sys; sys.exit(3)" and one["exit_code"] == "3"
    assert json.loads(two["command"]) == ["nonexistent_cmd_xyz"] and two["exit_code"] == "127"   # could not start
    assert float(one["start_t_s"]) <= float(one["end_t_s"])
    assert [e["message"] for e in read_events(first_log)] == ["exit code 3"]
    assert [e["kind"] for e in read_events(second_log)] == ["exit"]
    assert "could not start" in read_events(second_log)[0]["message"]


def test_two_runs_at_once_without_log_write_two_logs(tmp_path):
    cmd = [PY, "-m", "gpuwise.cli.app", "run", "--json", "--", PY, "-c", "import time; time.sleep(0.5)"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=no_driver_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(3)]
    logs = [json.loads(p.communicate(timeout=60)[0])["log"] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(logs)) == 3 and all((tmp_path / log).is_file() for log in logs)


def test_the_default_name_is_taken_exclusively(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda *_: "20261206-115405")
    names = [default_log_path(tmp_path).name for _ in range(3)]
    assert names == ["gpuwise-run-20261206-115405.db", "gpuwise-run-20261206-115405-2.db",
                     "gpuwise-run-20261206-115405-3.db"]
    with pytest.raises(MonitorError, match="cannot write the run log"):
        default_log_path(tmp_path / "no" / "such" / "dir")


def test_an_explicit_log_that_holds_a_run_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    log = tmp_path / "run2.sqlite"
    first = gpuwise("run", "--log", str(log), "--model", "hf:Qwen/Qwen2.5-0.5B", "--seq-len", "128", "--",
                    PY, "-c", "pass", env=no_driver_env())
    assert first.returncode == 0, first.stderr
    meta, digest = read_meta(log), _digest(log)
    assert json.loads(meta["workload"])["model"] == "hf:Qwen/Qwen2.5-0.5B"

    marker = tmp_path / "started"
    again = gpuwise("run", "--log", str(log), "--", PY, "-c", f"open({str(marker)!r}, 'w')", env=no_driver_env())
    assert again.returncode == 2
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: --log") and "already exists" in lines[0], lines
    assert not marker.exists()                                  # the command never started
    assert _digest(log) == digest and read_meta(log) == meta    # nothing lost, nothing mixed in


def test_an_empty_file_is_taken_as_a_new_log(tmp_path):
    log = tmp_path / "from-mktemp.db"
    log.touch()
    r = gpuwise("run", "--log", str(log), "--", PY, "-c", "raise SystemExit(4)", env=no_driver_env())
    assert r.returncode == 4, r.stderr
    assert read_meta(log)["exit_code"] == "4"


def test_run_help_says_the_log_is_a_new_file():
    r = gpuwise("run", "--help", env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0
    assert "one that exists is refused" in r.stdout and "-2, -3" in r.stdout
