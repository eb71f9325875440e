"""`report --html` to a path that cannot be written: one line, exit 2, and no file left behind (neither an
empty report nor the temporary file): a directory, a missing parent, a full disk (RLIMIT_FSIZE: EFBIG)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

HEADER = "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n"
ROWS = "".join(f"2026/11/20 10:00:{s:02d}.000, NVIDIA A100-SXM4-40GB, 0, 30 %, 12000 MiB, 40960 MiB, 150.00 W\n"
               for s in range(0, 60, 10))


def _report(tmp_path, html, preexec_fn=None):
    log = tmp_path / "smi.csv"
    log.write_text(HEADER + ROWS)
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "report", str(log), "--html", str(html)],
                          capture_output=True, text=True, timeout=120, preexec_fn=preexec_fn)


def _one_line_exit_2(r):
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "HTML report" in r.stderr


def test_html_to_a_directory(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    r = _report(tmp_path, target)
    _one_line_exit_2(r)
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "smi.csv"]


def test_html_to_a_missing_parent(tmp_path):
    r = _report(tmp_path, tmp_path / "no" / "such" / "report.html")
    _one_line_exit_2(r)
    assert not (tmp_path / "no").exists()


def test_html_on_a_full_disk_leaves_no_file(tmp_path):
    def small_files() -> None:   # a write past 20 kB fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out = tmp_path / "html"
    out.mkdir()
    r = _report(tmp_path, out / "report.html", preexec_fn=small_files)
    _one_line_exit_2(r)
    assert list(out.iterdir()) == []


def test_a_failed_write_keeps_the_previous_report(tmp_path):
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    target = tmp_path / "report.html"
    target.write_text("previous")
    _one_line_exit_2(_report(tmp_path, target, preexec_fn=small_files))
    assert target.read_text() == "previous"
