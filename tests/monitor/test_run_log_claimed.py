"""A run's --log is claimed exclusively, and a run that fails before its command starts leaves no log (review
findings). Before: ``check_new_log`` looked at the path and SQLite opened it later, so two runs given the same
new --log could both take it and write into one log; and a run refused after its log was made (an unknown
monitor backend, exit 2) left an empty .db behind."""

from __future__ import annotations

import os
import sys

import pytest

from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.runner import create_new_log
from gpuwise.runlog import read_meta

from monitor_fakes import gpuwise

PY = sys.executable


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GPUWISE_MONITOR_BACKEND"}
    env.update(extra)
    return env


def test_the_path_is_created_exclusively_and_a_second_claim_is_refused(tmp_path):
    log = tmp_path / "run.db"
    first = create_new_log(log)
    try:
        assert first.created and log.is_file() and log.stat().st_size == 0
        with pytest.raises(MonitorError, match="another run"):
            create_new_log(log)              # the first run has not written it yet: still refused
    finally:
        first.release()


def test_a_run_given_a_log_another_run_holds_is_refused_and_never_starts(tmp_path):
    log, marker = tmp_path / "run.db", tmp_path / "started"
    held = create_new_log(log)               # a run that has just created it, before SQLite writes
    try:
        r = gpuwise("run", "--log", str(log), "--", PY, "-c", f"open({str(marker)!r}, 'w')", env=_env())
    finally:
        held.release()
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "another run" in lines[0], lines
    assert not marker.exists() and log.stat().st_size == 0      # nothing written into the other run's log


def test_an_existing_empty_file_is_still_taken(tmp_path):
    log = tmp_path / "mktemp.db"
    log.touch()
    claim = create_new_log(log)
    assert not claim.created
    claim.release()
    r = gpuwise("run", "--log", str(log), "--", PY, "-c", "raise SystemExit(5)", env=_env())
    assert r.returncode == 5, r.stderr
    assert read_meta(log)["exit_code"] == "5"


@pytest.mark.parametrize("given", ["new", "empty", "none"])
def test_a_run_that_fails_before_its_command_starts_leaves_no_log(tmp_path, given):
    marker = tmp_path / "started"
    log = tmp_path / "run.db"
    if given == "empty":
        log.touch()
    args = ["--log", str(log)] if given != "none" else []
    r = gpuwise("run", *args, "--", PY, "-c", f"open({str(marker)!r}, 'w')",
                env=_env(GPUWISE_MONITOR_BACKEND="no-such-backend"), cwd=tmp_path)
    assert r.returncode == 2 and "unknown monitor backend" in r.stderr
    assert not marker.exists()
    left = sorted(p.name for p in tmp_path.iterdir())
    if given == "empty":      # the file it was given, empty as it was
        assert left == ["run.db"] and log.stat().st_size == 0
    else:                     # was: an empty run.db / gpuwise-run-….db (with its WAL side files)
        assert left == [], left
