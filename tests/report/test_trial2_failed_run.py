"""Trial 2: the report of a job that failed says so first. A script that raised at step 4 under `gpuwise run`
(exit code 1) got a full verdict and a JSON without its exit code; a step time of only warm-up steps showed
`not measured` with no reason. Real `gpuwise run` subprocesses over the replay backend, real run logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuwise.errors import EXIT_RESTART
from gpuwise.report import build_report
from gpuwise.report.measured import MIN_TIMED_STEPS, WARMUP_STEPS, unmeasured_step_time_why
from gpuwise.workload import Workload
from tests.calibrate.helpers import synthetic_log, write_model
from tests.report.helpers import ended_run_log, gpuwise_run_log, one_line, text_of

REPO = Path(__file__).resolve().parents[2]
REPLAY = REPO / "tests" / "fixtures" / "replay_two_a100.json"
PY = sys.executable
GIB = 2**30

# logs steps 1-3 into the run log (as the guard does), then raises at step 4 once the sampler has recorded enough
# samples of each GPU to judge (on a loaded machine a fixed sleep left too few: "too short to judge", not the verdict)
CRASHES_AT_STEP_4 = textwrap.dedent("""
    import sys, time
    from gpuwise.report.usage import MIN_SAMPLES_TO_JUDGE
    from gpuwise.runlog import RunLog, read_gpu_sample_times
    log = RunLog(sys.argv[1])
    for step in range(1, 5):
        if step == 4:
            deadline = time.monotonic() + 60
            while (len(read_gpu_sample_times(sys.argv[1])) < 2 * (MIN_SAMPLES_TO_JUDGE + 2)
                   and time.monotonic() < deadline):
                time.sleep(0.1)
            raise RuntimeError("boom at step 4")
        log.log_train(step, loss=1.0, step_time_s=0.05)
        time.sleep(0.1)
""")


def _gpuwise(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env, COLUMNS="200")
    return subprocess.run([PY, "-m", "gpuwise.cli.app", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def _run(log: Path, *cmd: str) -> int:
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{REPLAY}")
    return _gpuwise("run", "--log", log, "--interval", "0.1", "--", *cmd, env=env).returncode


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    log = tmp_path_factory.mktemp("crash") / "crash.db"
    assert _run(log, PY, "-c", CRASHES_AT_STEP_4, str(log)) == 1
    return log


def test_a_crashed_run_says_first_that_it_exited_with_its_code_after_its_last_step(crashed):
    r = _gpuwise("report", crashed)
    assert r.returncode == 0, r.stderr
    header, first, *rest = r.stdout.splitlines()
    assert header.startswith("gpuwise report:")
    assert "The job exited with code 1 after its last logged step (step 3)" in first and "failed run" in first
    verdict = next(line for line in rest if line.startswith("Verdict"))
    assert "of a failed run" in verdict


def test_a_crashed_runs_json_has_its_exit_code_and_how_it_ended(crashed):
    out = json.loads(_gpuwise("report", crashed, "--json").stdout)
    assert (out["exit_code"], out["ended"], out["signal"], out["last_logged_step"]) == (1, "failed", None, 3)


def test_a_run_killed_by_a_signal_is_said_killed_by_it(tmp_path):
    log = tmp_path / "killed.db"
    assert _run(log, PY, "-c", "import os, time; time.sleep(0.3); os.kill(os.getpid(), 9)") == 137
    out = json.loads(_gpuwise("report", log, "--json").stdout)
    assert (out["exit_code"], out["ended"], out["signal"]) == (137, "killed", "SIGKILL")
    first = _gpuwise("report", log).stdout.splitlines()[1]
    assert "The job was killed by signal SIGKILL (exit code 137), with no training step logged" in first


def test_a_run_that_ended_well_has_no_failure_line_and_ends_ok(tmp_path):
    log = tmp_path / "ok.db"
    assert _run(log, PY, "-c", "import time; time.sleep(0.3)") == 0
    out = json.loads(_gpuwise("report", log, "--json").stdout)
    assert (out["exit_code"], out["ended"], out["last_logged_step"]) == (0, "ok", None)
    assert "The job" not in _gpuwise("report", log).stdout


FRAMES = [[{"t_s": 100.0 + k, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 80.0,
            "memory_used_bytes": 12 * GIB, "memory_total_bytes": 40 * GIB}] for k in range(4)]


def _older_log(path: Path, exit_code: int, events: tuple[tuple[str, str], ...] = ()) -> Path:
    """A log as `gpuwise run` wrote it before it recorded the signal: exit_code only."""
    return ended_run_log(path, FRAMES, exit_code, events)


def test_an_older_log_with_a_shell_signal_code_says_what_a_shell_means_by_it(tmp_path, catalog):
    report = build_report(_older_log(tmp_path / "old.db", 137), catalog)
    assert report.to_dict()["ended"] == "failed" and report.to_dict()["signal"] is None
    first = one_line(text_of(report)).split("Memory needed")[0]
    assert "exited with code 137 (a shell's code for a process killed by SIGKILL) after its last logged step (step 7)" in first


def test_a_guard_preemption_exit_is_said_preempted_not_crashed(tmp_path, catalog):
    log = _older_log(tmp_path / "pre.db", EXIT_RESTART, events=(("preempted", "SIGTERM at step 7"),))
    report = build_report(log, catalog)
    assert report.to_dict()["ended"] == "preempted"
    assert "The job was preempted" in one_line(text_of(report))


def test_a_log_that_records_no_exit_has_no_exit_code_in_json(tmp_path, catalog):
    out = build_report(gpuwise_run_log(tmp_path / "unended.db", FRAMES, ended=False), catalog).to_dict()
    assert (out["exit_code"], out["ended"]) == (None, None)


@pytest.mark.parametrize("steps, why", [
    (3, f"3 steps, all warm-up (the first {WARMUP_STEPS} are not timed)"),
    (WARMUP_STEPS + 2, f"{WARMUP_STEPS + 2} steps, 2 timed after the {WARMUP_STEPS} warm-up ({MIN_TIMED_STEPS} needed)"),
])
def test_a_step_time_not_measured_says_why(tmp_path, catalog, steps, why):
    spec = write_model(tmp_path)
    workload = {"model": spec, "batch_size": 16, "precision": "fp32", "optimizer": "adamw"}
    log = synthetic_log(tmp_path / "short.db", workload=workload, step_time_s=0.01, steps=steps)
    report = build_report(log, catalog, workload=Workload.from_dict(workload))
    step = next(f for f in report.to_dict()["predicted_vs_measured"]["figures"] if f["name"] == "step time")
    assert step["measured"] is None and step["not_measured_why"] == why
    assert f"step time not measured: {why}" in one_line(text_of(report))


def test_the_reason_names_warm_up_only_when_every_step_was_warm_up():
    assert "all warm-up" in unmeasured_step_time_why(WARMUP_STEPS, 0)
    assert "1 step," in unmeasured_step_time_why(1, 0)
    some = unmeasured_step_time_why(WARMUP_STEPS + 2, 2)
    assert "2 timed" in some and f"{MIN_TIMED_STEPS} needed" in some and "all warm-up" not in some
    assert "no step times" in unmeasured_step_time_why(0, 0)
