"""The run log's meta keys the monitor writes are named once, in ``gpuwise.runlog`` beside ``WORKLOAD_KEY`` (the
run log's schema, which every part reads; ``gpuwise.monitor.log_meta`` imports them, and keeps its names working)
(trial: ``exit_code``, ``signal``, ``start_t_s`` … were bare strings spread over runner, sampler and log_meta, and
the report's readers spelled them again, free to drift from one another). A real ``run_command`` over a replay
writes exactly those names, each is documented in docs/runlog.md, and no reader of a log's meta spells one."""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

import gpuwise
from gpuwise.monitor import ReplayBackend, log_meta
from gpuwise.monitor.runner import exit_status, run_command
from gpuwise.runlog import (
    COMMAND_KEY, DRIVER_VERSION_KEY, END_T_S_KEY, EXIT_CODE_KEY, MONITOR_META_KEYS, PID_KEY, SIGNAL_KEY,
    START_ERROR_KEY, START_T_S_KEY, WORKLOAD_KEY, read_meta,
)

from monitor_fakes import two_gpu_frames

DOCS = Path(__file__).resolve().parents[2] / "docs" / "runlog.md"
SRC = Path(gpuwise.__file__).resolve().parent
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


def test_log_meta_names_the_keys_runlog_holds():
    assert log_meta.MONITOR_META_KEYS is MONITOR_META_KEYS
    assert (log_meta.START_T_S_KEY, log_meta.EXIT_CODE_KEY, log_meta.START_ERROR_KEY) == (
        START_T_S_KEY, EXIT_CODE_KEY, START_ERROR_KEY)


def test_no_reader_of_a_logs_meta_spells_a_key_again():
    # the defect: report/usage.py read meta.get("end_t_s"), run_end.py meta.get("exit_code"), ...
    keys = "|".join(MONITOR_META_KEYS)
    spelled = re.compile(rf"""meta(?:\.get\(|\[)\s*['"]({keys})['"]""")
    found = [f"{path.relative_to(SRC)}: {m.group(0)}" for path in sorted(SRC.rglob("*.py"))
             for m in spelled.finditer(path.read_text())]
    assert found == []
