"""A reader open when the run log's last writer closes (pandas in a notebook, `gpuwise report` during the run)
kept the log in WAL mode for good: the writer cannot leave WAL while another connection has the file, and a
read-only reader never can, so run.db-wal and run.db-shm stayed beside a finished log and every later read went
through them. The next reader, once no connection has the file open, switches it back."""

from __future__ import annotations

import sqlite3

from gpuwise.runlog import RunLog, open_for_reading, read_meta


def _beside(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def _writer_closed_under_an_open_reader(path):
    log = RunLog(path)
    log.set_meta("exit_code", 0)
    log.log_train(1, loss=1.0)
    log.flush()
    reader = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)    # as pandas' read_sql holds it
    assert reader.execute("SELECT count(*) FROM train_metrics").fetchone()[0] == 1
    log.close()
    reader.close()
    return path


def test_the_next_reader_switches_a_log_left_in_wal_back_and_leaves_nothing_beside_it(tmp_path):
    path = _writer_closed_under_an_open_reader(tmp_path / "run.db")
    assert path.read_bytes()[18:20] == b"\x02\x02" and _beside(path) == ["run.db-shm", "run.db-wal"]
    assert read_meta(path)["exit_code"] == "0"
    assert path.read_bytes()[18:20] == b"\x01\x01"
    assert _beside(path) == []
    conn = open_for_reading(path)
    assert conn.execute("SELECT count(*) FROM train_metrics").fetchone()[0] == 1
    conn.close()
    assert _beside(path) == []


def test_a_live_writer_keeps_its_log_in_wal_while_a_reader_reads_it(tmp_path):
    path = tmp_path / "live.db"
    log = RunLog(path)
    log.log_train(1, loss=1.0)
    log.flush()
    assert read_meta(path)["schema_version"] == "1"
    assert path.read_bytes()[18:20] == b"\x02\x02"         # the switch is refused while the writer has it
    log.log_train(2, loss=0.5)                              # and the writer goes on writing
    log.close()
    assert _beside(path) == [] and path.read_bytes()[18:20] == b"\x01\x01"
    conn = open_for_reading(path)
    assert conn.execute("SELECT count(*) FROM train_metrics").fetchone()[0] == 2
    conn.close()

