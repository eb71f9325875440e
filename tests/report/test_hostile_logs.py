"""Logs no GPU could have written: every reader refuses a value outside its physical range, naming the row,
and text from the file reaches the terminal without escape sequences."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from gpuwise.report.errors import ReportError
from gpuwise.report.sources import load_usage_log
from gpuwise.runlog import RunLog

HEADER = "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n"
GOOD = "2026/11/20 10:00:00.000, NVIDIA A100-SXM4-40GB, 0, 30 %, 12000 MiB, 40960 MiB, 150.00 W\n"


def _csv(tmp_path, row: str):
    path = tmp_path / "smi.csv"
    path.write_text(HEADER + GOOD + row)
    return path


@pytest.mark.parametrize("row, problem", [
    ("2026/11/20 10:00:10.000, NVIDIA A100-SXM4-40GB, 0, 500 %, 12000 MiB, 40960 MiB, 150.00 W", "utilization.gpu is 500"),
    ("2026/11/20 10:00:10.000, NVIDIA A100-SXM4-40GB, 0, 30 %, -12000 MiB, 40960 MiB, 150.00 W", "memory.used is -"),
    ("2026/11/20 10:00:10.000, NVIDIA A100-SXM4-40GB, 0, 30 %, 50000 MiB, 40960 MiB, 150.00 W", "memory.used .* is more than memory.total"),
    ("2026/11/20 10:00:10.000, NVIDIA A100-SXM4-40GB, 0, 30 %, 12000 MiB, 40960 MiB, -150.00 W", "power.draw is -150"),
    ("2026/11/20 10:00:10.000, NVIDIA A100-SXM4-40GB, 0, 30 %, 12000 MiB, 95367431640625000 MiB, 150 W",
     "memory.total is"),
], ids=["util-500", "negative-memory", "used-over-total", "negative-power", "1e20-GB"])
def test_csv_values_outside_physical_ranges_are_refused_naming_the_line(tmp_path, row, problem):
    with pytest.raises(ReportError, match=r"smi.csv:3: " + problem):
        load_usage_log(_csv(tmp_path, row + "\n"))


def test_dmon_nan_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "dmon.log"
    path.write_text("# gpu    pwr  gtemp     sm    mem\n# Idx      W      C      %      %\n"
                    "    0     43     48     10      5\n    0    nan     48     10      5\n")
    with pytest.raises(ReportError, match=r"dmon.log:4: pwr is nan"):
        load_usage_log(path)


def _run_log(tmp_path, **row):
    db = tmp_path / "run.db"
    with RunLog(db) as log:
        log.write_gpu_samples([{"t_s": 1.0, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB",
                                "utilization_pct": 40.0, "memory_used_bytes": 2**30,
                                "memory_total_bytes": 40 * 2**30, **row}])
    return db


def test_run_log_with_text_where_a_number_belongs_is_refused_naming_the_row(tmp_path):
    with pytest.raises(ReportError, match=r"gpu_samples row 1 .*utilization_pct is 'busy', not a number"):
        load_usage_log(_run_log(tmp_path, utilization_pct="busy"))


def test_run_log_with_undecodable_text_is_refused_in_one_line(tmp_path):
    db = _run_log(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE gpu_samples SET name = CAST(X'4e56fffe41' AS TEXT)")  # 'NV', 2 bytes not UTF-8, 'A'
    with pytest.raises(ReportError, match="unreadable run log"):
        load_usage_log(db)


def test_escape_sequences_in_a_gpu_name_never_reach_the_terminal(tmp_path):
    row = GOOD.replace("NVIDIA A100-SXM4-40GB", "NVIDIA \x1b[2J\x1b]0;pwned\x07A100-SXM4-40GB")
    log = load_usage_log(_csv(tmp_path, row.replace("10:00:00", "10:00:10")))
    assert {s.name for s in log.samples} == {"NVIDIA A100-SXM4-40GB"}


def test_an_error_line_naming_a_file_carries_no_escape_sequences(tmp_path):
    path = tmp_path / "\x1b[2J\x1b[31msmi.csv"
    path.write_text("1, 2, 3\n")
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "report", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "\x1b" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
