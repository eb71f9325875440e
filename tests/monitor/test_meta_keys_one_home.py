"""The run log's meta keys the monitor writes are named once, in ``gpuwise.monitor.log_meta`` (trial: ``exit_code``,
``signal``, ``start_t_s`` … were bare strings spread over runner, sampler and log_meta, free to drift from one
another and from the readers). A real ``run_command`` over a replay writes exactly those names, and each is
documented in docs/runlog.md."""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

from gpuwise.monitor import ReplayBackend
from gpuwise.monitor.log_meta import (
    COMMAND_KEY, DRIVER_VERSION_KEY, END_T_S_KEY, EXIT_CODE_KEY, MONITOR_META_KEYS, PID_KEY, SIGNAL_KEY,
    START_ERROR_KEY, START_T_S_KEY,
)
from gpuwise.monitor.runner import exit_status, run_command
from gpuwise.runlog import WORKLOAD_KEY, read_meta

from monitor_fakes import two_gpu_frames

DOCS = Path(__file__).resolve().parents[2] / "docs" / "runlog.md"
NOT_THE_MONITORS = {"schema_version", WORKLOAD_KEY}   # the run log's own, and the workload (runlog.py names it)


def test_every_meta_key_a_signal_ended_run_writes_is_one_log_meta_names(tmp_path):
    log = tmp_path / "killed.db"
    result = run_command([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                         log_path=log, interval_s=0.1, backend=ReplayBackend(two_gpu_frames(3)), announce=False)
    meta = read_meta(log)
    assert set(meta) - NOT_THE_MONITORS <= set(MONITOR_META_KEYS)
    assert meta[EXIT_CODE_KEY] == str(128 + signal.SIGKILL) == str(result.exit_code)
    assert meta[SIGNAL_KEY] == "SIGKILL" == result.signal
    assert float(meta[END_T_S_KEY]) >= float(meta[START_T_S_KEY])
    assert {COMMAND_KEY, PID_KEY, DRIVER_VERSION_KEY} <= set(meta)


def test_a_command_that_cannot_start_ends_its_log_under_the_named_keys(tmp_path):
    log = tmp_path / "missing.db"
    result = run_command(["/nonexistent/train-gpuwise-test"], log_path=log, interval_s=0.1,
                         backend=ReplayBackend(two_gpu_frames(3)), announce=False)
    meta = read_meta(log)
    assert result.exit_code == 127 and meta[EXIT_CODE_KEY] == "127"
    assert "No such file" in meta[START_ERROR_KEY] and END_T_S_KEY in meta
    assert set(meta) - NOT_THE_MONITORS <= set(MONITOR_META_KEYS)


def test_exit_status_speaks_in_the_named_keys():
    assert exit_status(4) == {EXIT_CODE_KEY: 4}
    assert exit_status(-signal.SIGTERM) == {EXIT_CODE_KEY: 128 + signal.SIGTERM, SIGNAL_KEY: "SIGTERM"}


def test_each_named_meta_key_is_documented_in_the_run_log_docs():
    documented = set(re.findall(r"`([a-z_]+)`", DOCS.read_text()))
    assert sorted(set(MONITOR_META_KEYS) - documented) == []
