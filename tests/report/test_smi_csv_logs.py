"""Reading `nvidia-smi --query-gpu=... --format=csv -l N` logs in the variants people have."""

from __future__ import annotations

import pytest

from gpuwise.report.errors import ReportError
from gpuwise.report.sources import load_usage_log

MIB = 2**20
HEADER = "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]"
ROWS = [
    "2026/11/02 10:00:00.100, NVIDIA A100-SXM4-40GB, 0, 31 %, 12288 MiB, 40960 MiB, 95.50 W",
    "2026/11/02 10:00:00.100, NVIDIA A100-SXM4-40GB, 1, 0 %, 4 MiB, 40960 MiB, [N/A]",
    "2026/11/02 10:00:05.100, NVIDIA A100-SXM4-40GB, 0, 45 %, 12300 MiB, 40960 MiB, 120.25 W",
    "2026/11/02 10:00:05.100, NVIDIA A100-SXM4-40GB, 1, 0 %, 4 MiB, 40960 MiB, [Not Supported]",
]


def write(tmp_path, text: str, name: str = "smi.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_units_header_and_two_gpus(tmp_path):
    log = load_usage_log(write(tmp_path, "\n".join([HEADER, *ROWS]) + "\n"))
    assert log.source == "nvidia-smi csv" and len(log.samples) == 4
    s0 = log.samples[0]
    assert (s0.gpu_index, s0.utilization_pct, s0.memory_used_bytes) == (0, 31.0, 12288 * MIB)
    assert s0.memory_total_bytes == 40960 * MIB and s0.power_w == 95.5
    assert log.samples[1].power_w is None and log.samples[3].power_w is None  # [N/A], [Not Supported]
    assert log.samples[2].t_s - log.samples[0].t_s == pytest.approx(5.0)


def test_nounits_values_without_units(tmp_path):
    rows = [r.replace(" %", "").replace(" MiB", "").replace(" W", "") for r in ROWS]
    log = load_usage_log(write(tmp_path, "\n".join([HEADER, *rows]) + "\n"))
    assert log.samples[2].memory_used_bytes == 12300 * MIB and log.samples[2].power_w == 120.25


def test_noheader_needs_the_columns_and_says_so_naming_line_1(tmp_path):
    p = write(tmp_path, "\n".join(ROWS) + "\n")
    with pytest.raises(ReportError, match=r"smi\.csv:1: .*--columns"):
        load_usage_log(p)
    log = load_usage_log(p, columns="timestamp,name,index,utilization.gpu,memory.used,memory.total,power.draw".split(","))
    assert len(log.samples) == 4 and log.samples[0].memory_used_bytes == 12288 * MIB


def test_a_header_repeated_by_appending_logs_is_skipped(tmp_path):
    log = load_usage_log(write(tmp_path, "\n".join([HEADER, *ROWS[:2], HEADER, *ROWS[2:]]) + "\n"))
    assert len(log.samples) == 4


def test_gpus_without_an_index_column_are_told_apart_by_position_within_a_timestamp(tmp_path):
    header = "timestamp, utilization.gpu [%], memory.used [MiB]"
    rows = ["2026/11/02 10:00:00.100, 10 %, 100 MiB", "2026/11/02 10:00:00.100, 20 %, 200 MiB",
            "2026/11/02 10:00:01.100, 11 %, 101 MiB", "2026/11/02 10:00:01.100, 21 %, 201 MiB"]
    log = load_usage_log(write(tmp_path, "\n".join([header, *rows]) + "\n"))
    assert [s.gpu_index for s in log.samples] == [0, 1, 0, 1]


@pytest.mark.parametrize("bad_row, message", [
    ("2026/11/02 10:00:10.100, NVIDIA A100-SXM4-40GB, 0, 31 %, 12288 MiB", r"smi\.csv:4: expected 7 .* found 5"),
    ("2026/11/02 10:00:10.100, NVIDIA A100-SXM4-40GB, 0, lots, 12288 MiB, 40960 MiB, 9 W", r"smi\.csv:4: utilization\.gpu is not a number: 'lots'"),
    ("yesterday, NVIDIA A100-SXM4-40GB, 0, 1 %, 12288 MiB, 40960 MiB, 9 W", r"smi\.csv:4: timestamp is not a date"),
])
def test_a_malformed_line_raises_naming_file_and_line(tmp_path, bad_row, message):
    p = write(tmp_path, "\n".join([HEADER, *ROWS[:2], bad_row, *ROWS[2:]]) + "\n")
    with pytest.raises(ReportError, match=message):
        load_usage_log(p)


def test_a_last_line_cut_off_mid_write_is_skipped_with_a_note(tmp_path):
    log = load_usage_log(write(tmp_path, "\n".join([HEADER, *ROWS, "2026/11/02 10:00:10.100, NVIDIA A1"])))
    assert len(log.samples) == 4 and any("cut off" in n for n in log.notes)


def test_a_lost_gpu_in_the_log_is_recorded(tmp_path):
    rows = [*ROWS[:2], "2026/11/02 10:00:05.100, NVIDIA A100-SXM4-40GB, 0, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]"]
    log = load_usage_log(write(tmp_path, "\n".join([HEADER, *rows]) + "\n"))
    assert log.samples[-1].lost == 1


def test_an_empty_or_foreign_file_is_a_report_error(tmp_path):
    with pytest.raises(ReportError, match="no samples"):
        load_usage_log(write(tmp_path, HEADER + "\n"))
    with pytest.raises(ReportError, match="no such log"):
        load_usage_log(tmp_path / "missing.csv")


def test_a_log_without_memory_columns_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "util-only.csv"
    path.write_text("timestamp, name, index, utilization.gpu [%], power.draw [W]\n"
                    "2026/11/20 10:00:00.000, NVIDIA A100-SXM4-40GB, 0, 30 %, 150.00 W\n"
                    "2026/11/20 10:00:01.000, NVIDIA A100-SXM4-40GB, 0, 35 %, 155.00 W\n")
    with pytest.raises(ReportError, match="no memory columns"):
        load_usage_log(path)
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "report", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "memory" in r.stderr and "Traceback" not in r.stderr
