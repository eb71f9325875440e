"""A job the user stopped is said stopped, not failed. `kill -TERM` on `gpuwise run`, whose command's handler
then exited 5, opened the report with "The job exited with code 5 … failed run", though the run log's
``signals`` event shows that gpuwise passed the SIGTERM on. Real `gpuwise run` subprocesses over the replay
backend, real signals, real run logs; the rarer ends (a signal that is not a stop, a preemption) on logs written
as `gpuwise run` writes them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwise.errors import EXIT_RESTART
from gpuwise.report import build_report
from tests.report.helpers import ended_run_log, one_line, text_of

REPO = Path(__file__).resolve().parents[2]
REPLAY = REPO / "tests" / "fixtures" / "replay_two_a100.json"
PY = sys.executable
GIB = 2**30

# sets its SIGTERM disposition (argv[2]), logs steps 1-3 as the guard does, says it is ready (file argv[3]) once the
# sampler has recorded enough samples of each GPU to judge (counted, not slept for: a loaded machine samples fewer
# in a given time, and the verdict turns "too short to judge"), waits
CHILD = """
import signal, sys, time
from pathlib import Path
from gpuwise.report.usage import MIN_SAMPLES_TO_JUDGE
from gpuwise.runlog import RunLog, read_gpu_sample_times
how = sys.argv[2]
if how == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif how != "default":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(int(how)))
log = RunLog(sys.argv[1])
for step in range(1, 4):
    log.log_train(step, loss=1.0, step_time_s=0.05)
log.close()
deadline = time.monotonic() + 120
while len(read_gpu_sample_times(sys.argv[1])) < MIN_SAMPLES_TO_JUDGE + 2 and time.monotonic() < deadline:
    time.sleep(0.1)
Path(sys.argv[3]).touch()
time.sleep(60)
"""


def _gpuwise(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gpuwise.cli.app", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, COLUMNS="200"))


def _stopped_run(tmp_path: Path, how: str) -> Path:
    """A `gpuwise run` whose command, handling SIGTERM as ``how`` says, gets `kill -TERM`d through gpuwise once it
    has logged 3 steps. The grace period before SIGKILL is 0.5 s for a command that ignores SIGTERM, else 60 s (a
    loaded machine may take more than 0.5 s to end a Python process)."""
    log, ready = tmp_path / "run.db", tmp_path / "ready"
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{REPLAY}")
    run = subprocess.Popen([PY, "-m", "gpuwise.cli.app", "run", "--log", log, "--interval", "0.1", "--kill-after",
                            "0.5" if how == "ignore" else "60", "--", PY, "-c", CHILD, log, how, ready],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline_s = time.monotonic() + 180
    while not ready.exists() and run.poll() is None and time.monotonic() < deadline_s:
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=120)
    return log


@pytest.mark.parametrize("how, exit_code, killed_by, said", [
    ("5", 5, None, "gpuwise passed on SIGTERM, and it exited with code 5 after its last logged step (step 3)"),
    ("0", 0, None, "gpuwise passed on SIGTERM, and it exited with code 0 after its last logged step (step 3)"),
    ("default", 143, "SIGTERM", "gpuwise passed on SIGTERM, which ended it (exit code 143) after its last"),
    ("ignore", 137, "SIGKILL", "gpuwise passed on SIGTERM, and killed it with SIGKILL after the grace period "
                               "(exit code 137) after its last logged step (step 3)"),
])
def test_a_run_stopped_through_gpuwise_is_said_stopped_however_its_command_then_ended(tmp_path, how, exit_code,
                                                                                     killed_by, said):
    log = _stopped_run(tmp_path, how)
    out = json.loads(_gpuwise("report", log, "--json").stdout)
    assert (out["exit_code"], out["signal"], out["stop_signal"], out["ended"], out["last_logged_step"]) == (
        exit_code, killed_by, "SIGTERM", "stopped", 3)
    text = _gpuwise("report", log).stdout
    first = text.splitlines()[1]
    assert first.startswith("The job was stopped: ") and said in first and "failed" not in first
    assert "failed run" not in text
    assert "(of a stopped run: see the first line)" in next(line for line in text.splitlines()
                                                            if line.startswith("Verdict"))


FRAMES = [[{"t_s": 100.0 + k, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 80.0,
            "memory_used_bytes": 12 * GIB, "memory_total_bytes": 40 * GIB}] for k in range(12)]


def _ended_log(path: Path, exit_code: int, *events: tuple[str, str], signal_name: str | None = None) -> Path:
    """A run log as `gpuwise run` writes it, ending with ``exit_code`` (and ``signal_name``) after ``events``."""
    return ended_run_log(path, FRAMES, exit_code, events, signal_name=signal_name)


def test_a_guard_preempted_through_a_passed_on_sigterm_is_said_preempted(tmp_path, catalog):
    log = _ended_log(tmp_path / "pre.db", EXIT_RESTART, ("preempted", "signal received; checkpointing step 7"),
                     ("signals", '["SIGTERM"]'))
    report = build_report(log, catalog)
    assert (report.to_dict()["ended"], report.to_dict()["stop_signal"]) == ("preempted", "SIGTERM")
    assert "The job was preempted" in one_line(text_of(report))
    assert "(of a preempted run: see the first line)" in one_line(text_of(report))


@pytest.mark.parametrize("message", ['["SIGUSR1", "SIGWINCH"]', "not json", '{"SIGTERM": 1}', "[15]"])
def test_signals_that_do_not_stop_or_an_event_in_another_form_leave_a_crash_failed(tmp_path, catalog, message):
    report = build_report(_ended_log(tmp_path / "crash.db", 1, ("signals", message)), catalog)
    assert (report.to_dict()["ended"], report.to_dict()["stop_signal"]) == ("failed", None)
    assert "The job exited with code 1 after its last logged step (step 7): its figures describe a failed run" in (
        one_line(text_of(report)))


def test_a_sigkill_not_sent_by_gpuwise_after_a_stop_is_named_as_the_signal_that_ended_it(tmp_path, catalog):
    log = _ended_log(tmp_path / "oom.db", 137, ("signals", '["SIGINT"]'), signal_name="SIGKILL")
    report = build_report(log, catalog)
    assert report.to_dict()["ended"] == "stopped"
    assert "gpuwise passed on SIGINT, then signal SIGKILL ended it (exit code 137)" in one_line(text_of(report))
