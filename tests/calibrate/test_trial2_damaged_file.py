"""A damaged calibration file refuses only the commands that apply it (a new user's second trial, defect 3).

Before: with `global_factor = "abc"`, `gpuwise report tests/fixtures/seed_a100_smi.csv` (no workload: no time
prediction) exited 2 on the file. Now a command that never applies it goes on with one warning line naming the
fix; one that applies it (estimate) still refuses in one line naming `gpuwise calibrate --reset`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.calibrate import CalibrateError, load
from gpuwise.calibrate.fit import FitRow, fit_gpu
from gpuwise.calibrate.store import save, user_calibration_path

SMI_LOG = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"


@pytest.fixture
def damaged(config_dir):
    """A file `gpuwise calibrate` wrote, then hand-edited: global_factor = "abc"."""
    cal = fit_gpu("a100-40gb-sxm4", [FitRow("r1", {"matmul/fp16": 0.01}, 0.0, 0.012)], today="2026-12-07")
    path = save({"a100-40gb-sxm4": cal})
    text = path.read_text()
    key = f"global_factor = {cal.global_factor!r}"
    assert key in text
    path.write_text(text.replace(key, 'global_factor = "abc"'))
    return path


def test_a_report_without_a_workload_goes_on_with_one_warning(gpuwise, damaged):
    r = gpuwise("report", SMI_LOG)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: warning:") and "calibrate --reset" in lines[0]
    assert "Verdict" in r.stdout


def test_an_estimate_that_applies_it_refuses_in_one_line(gpuwise, damaged):
    r = gpuwise("estimate", "torchvision:resnet18", "--batch-size", "8", "--gpu", "a100-40gb-sxm4")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpuwise: error:")
    assert "global_factor" in lines[0] and "calibrate --reset" in lines[0]


def test_a_file_that_is_not_text_names_the_reset(config_dir):
    path = user_calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(CalibrateError, match="calibrate --reset"):
        load()


def test_gpuwise_run_still_reports_and_names_the_damaged_file(gpuwise, damaged, tmp_path, monkeypatch):
    # before: a run with a workload ended "no report: ...calibration.toml: not a gpuwise calibration file"
    import sys

    replay = Path(__file__).resolve().parents[1] / "fixtures" / "replay_two_a100.json"
    monkeypatch.setenv("GPUWISE_MONITOR_BACKEND", f"replay:{replay}")
    r = gpuwise("run", "--log", tmp_path / "run.db", "--interval", "0.1", "--model", "torchvision:resnet18",
                "--batch-size", "8", "--", sys.executable, "-c", "import time; time.sleep(0.5)")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stderr.split())
    assert "no report" not in text and "Verdict" in text
    assert "not a gpuwise calibration file" in text and "calibrate--reset" in "".join(text.split())   # wrapped
