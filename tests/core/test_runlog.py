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
        # WAL while written (readers see committed rows as it goes), a plain file once closed (read with no -wal)
        reader = sqlite3.connect(path)
        assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        reader.close()
    assert read_meta(path)["command"] == '["python", "train.py"]'
    (sample,) = read_gpu_samples(path)
    assert sample["memory_used_bytes"] == 12 * 10**9 and sample["power_w"] is None and sample["lost"] == 0
    metrics = read_train_metrics(path)
    assert metrics["loss"] == [(10, 2.0, 2.5)] and metrics["lr"] == [(10, 2.0, 1e-3)]
    assert read_events(path)[0]["kind"] == "checkpoint"
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_reading_a_file_that_is_not_a_run_log_is_a_clear_error(tmp_path):
    bogus = tmp_path / "x.sqlite"
    bogus.write_text("hello")
    with pytest.raises(RunLogError, match="not a gpuwise run log"):
        read_meta(bogus)
    with pytest.raises(RunLogError, match="no such run log"):
        read_meta(tmp_path / "missing.sqlite")


def test_a_run_log_of_a_newer_schema_is_read_with_one_warning(tmp_path, caplog):
    import logging

    from gpuwise.runlog import SCHEMA_VERSION

    path = tmp_path / "future.db"
    with RunLog(path) as log:
        log.set_meta("command", ["train"])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        assert read_meta(path)["command"] == '["train"]'
        read_events(path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"schema version {SCHEMA_VERSION + 1}" in warnings[0] and "future.db" in warnings[0]


def test_a_run_log_of_this_schema_gives_no_warning(tmp_path, caplog):
    import logging

    path = tmp_path / "now.db"
    with RunLog(path) as log:
        log.set_meta("command", ["train"])
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        read_meta(path)
    assert not caplog.records
