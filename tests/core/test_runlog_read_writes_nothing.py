"""Reading a run log writes nothing beside it (a new user's CLI sweep: `advise run.db`, `report` and `calibrate`
left run.db-shm and run.db-wal next to a log they only read, and `gpuwise run` left both after it ended: the
writer's WAL mode stays in the file, and a read-only WAL connection creates them; where the reader cannot write,
the log could not be read at all)."""

from __future__ import annotations

import sqlite3

from gpuwise.runlog import RunLog, open_for_reading


def _beside(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def _written(path, steps=3):
    with RunLog(path) as log:
        for step in range(1, steps + 1):
            log.log_train(step, loss=1.0 / step)
    return path


def test_a_finished_log_is_read_without_a_file_appearing_beside_it(tmp_path):
    path = _written(tmp_path / "run.db")
    assert _beside(path) == []                       # the writer left nothing either
    conn = open_for_reading(path)
    assert [r["step"] for r in conn.execute("SELECT step FROM train_metrics ORDER BY step")] == [1, 2, 3]
    conn.close()
    assert _beside(path) == []


def test_a_log_an_older_gpuwise_left_in_wal_mode_is_read_without_writing(tmp_path):
    path = _written(tmp_path / "old.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")          # as every log was left before
    conn.close()
    assert path.read_bytes()[18:20] == b"\x02\x02" and _beside(path) == []
    reader = open_for_reading(path)
    assert reader.execute("SELECT count(*) FROM train_metrics").fetchone()[0] == 3
    reader.close()
    assert _beside(path) == []


def test_a_live_log_is_still_read_as_it_is_written(tmp_path):
    path = tmp_path / "live.db"
    log = RunLog(path)
    log.log_train(1, loss=1.0)
    log.flush()
    reader = open_for_reading(path)                   # the writer is open: read through its WAL
    assert reader.execute("SELECT count(*) FROM train_metrics").fetchone()[0] == 1
    reader.close()
    log.log_train(2, loss=0.5)
    log.close()
    assert _beside(path) == []
    assert open_for_reading(path).execute("SELECT count(*) FROM train_metrics").fetchone()[0] == 2
