"""A time column of Unix times in milliseconds (MLflow's ``timestamp``; W&B's ``_timestamp`` is seconds) is read
in seconds and said once: read as seconds, every step was 1000x too long, and every price with it."""

from __future__ import annotations

import json

import pytest

from gpuwise.advise import read_log
from gpuwise.cli.app import main

STEP_TIME_S = 0.25
UNIX_START_S = 1_733_000_000.0   # 2024-11-30


def _mlflow_csv(tmp_path, start_s: float = UNIX_START_S, ms_per_s: float = 1000.0):
    """An MLflow metric-history export, widened: step, Unix ``timestamp`` (ms by default), loss; 300 steps."""
    path = tmp_path / "mlflow_metrics.csv"
    rows = [f"{s},{(start_s + STEP_TIME_S * s) * ms_per_s:.2f},{2.0 * (s + 1) ** -0.3:.5f}" for s in range(300)]
    path.write_text("step,timestamp,loss\n" + "\n".join(rows) + "\n")
    return path


def test_an_mlflow_timestamp_in_milliseconds_gives_the_step_time_in_seconds_said_once(tmp_path, capsys):
    path = _mlflow_csv(tmp_path)
    with pytest.raises(SystemExit) as code:
        main(["advise", str(path), "--json"])
    assert code.value.code == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["step_time_s"] == pytest.approx(STEP_TIME_S)
    notes = [line for line in captured.err.splitlines() if "milliseconds" in line]
    assert len(notes) == 1 and "'timestamp'" in notes[0] and "read as seconds" in notes[0]


def test_a_unix_time_in_seconds_is_read_as_it_is_and_said_nothing_of(tmp_path, capsys):
    path = _mlflow_csv(tmp_path, ms_per_s=1.0)
    with pytest.raises(SystemExit):
        main(["advise", str(path), "--json"])
    captured = capsys.readouterr()
    assert json.loads(captured.out)["step_time_s"] == pytest.approx(STEP_TIME_S)
    assert "milliseconds" not in captured.err


def test_read_log_gives_the_curves_times_in_seconds(tmp_path):
    assert read_log(_mlflow_csv(tmp_path)).curve.t_s[0] == pytest.approx(UNIX_START_S)
