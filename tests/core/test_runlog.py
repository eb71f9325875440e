import sqlite3

import pytest

from gpuwise.runlog import RunLog, RunLogError, read_events, read_gpu_samples, read_meta, read_train_metrics


def test_runlog_round_trips_samples_metrics_events_and_meta(tmp_path):
    path = tmp_path / "run.sqlite"
    with RunLog(path) as log:
        log.set_meta("command", ["python", "train.py"])
        log.write_gpu_samples([{"t_s": 1.0, "gpu_index": 0, "memory_used_bytes": 12 * 10**9, "utilization_pct": 30.0}])
        log.log_train(10, t_s=2.0, loss=2.5, lr=1e-3)
        log.log_event("checkpoint", "step 10", t_s=3.0)
    assert read_meta(path)["command"] == '["python", "train.py"]'
    (sample,) = read_gpu_samples(path)
    assert sample["memory_used_bytes"] == 12 * 10**9 and sample["power_w"] is None and sample["lost"] == 0
    metrics = read_train_metrics(path)
    assert metrics["loss"] == [(10, 2.0, 2.5)] and metrics["lr"] == [(10, 2.0, 1e-3)]
    assert read_events(path)[0]["kind"] == "checkpoint"
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reading_a_file_that_is_not_a_run_log_is_a_clear_error(tmp_path):
    bogus = tmp_path / "x.sqlite"
    bogus.write_text("hello")
    with pytest.raises(RunLogError, match="not a gpuwise run log"):
        read_meta(bogus)
    with pytest.raises(RunLogError, match="no such run log"):
        read_meta(tmp_path / "missing.sqlite")
