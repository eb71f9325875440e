"""After a kill and a resume, the run log holds each step once: the killed attempt's rows of the steps after the
checkpoint the restart resumed from (which the restart redoes) are moved to ``train_metrics_superseded``, kept,
not deleted, and not left beside the resumed run's rows in ``train_metrics``."""

from __future__ import annotations

import signal
import sqlite3

import pytest

from gpuwise.runlog import RunLog

ARGS = ["--steps", "10", "--seed", "1", "--save-every", "4", "--hidden", "16", "--samples", "64"]


def _rows(db, table: str = "train_metrics") -> set[tuple]:
    with sqlite3.connect(db) as conn:
        return set(conn.execute(f"SELECT t_s, step, name, value FROM {table}").fetchall())


@pytest.mark.slow
def test_steps_redone_after_a_sigkill_leave_the_run_log_with_each_step_once(tmp_path, zygote):
    db, ckpt = tmp_path / "run.db", tmp_path / "ckpt"
    # SIGKILLed before step 8: step-4 saved, steps 5-7 logged after it, 1.1 s apart: a row written a second or more
    # after the log's oldest uncommitted one commits them both, in the writing thread (with rows 0.4 s apart, steps
    # 5 and 6 relied on the log's timer thread committing within the 0.2 s left before the kill: a loaded machine
    # may not run it in time)
    zygote.start(["--checkpoint-dir", str(ckpt), "--run-log", str(db), *ARGS, "--die-at-step", "8",
                  "--step-sleep-s", "1.1"], tmp_path / "a.out", tmp_path / "a.err")
    assert zygote.wait() == -signal.SIGKILL, (tmp_path / "a.err").read_text()
    killed = _rows(db)
    redone = {row for row in killed if row[1] > 4}
    assert {row[1] for row in redone} >= {5, 6}, "the killed attempt's rows after step 4 are in the log"

    zygote.start(["--checkpoint-dir", str(ckpt), "--run-log", str(db), *ARGS], tmp_path / "b.out", tmp_path / "b.err")
    assert zygote.wait() == 0, (tmp_path / "b.err").read_text()
    rows = _rows(db)
    steps_by_name: dict[str, list[int]] = {}
    for _, step, name, _ in rows:
        steps_by_name.setdefault(name, []).append(step)
    assert steps_by_name and all(sorted(steps) == list(range(1, 11)) for steps in steps_by_name.values())
    assert killed - redone <= rows and not rows & redone  # the rows up to step 4 stay, the redone ones moved
    assert _rows(db, "train_metrics_superseded") == redone  # kept
    err = (tmp_path / "b.err").read_text()
    assert "resumed from step-000000004 (step 4, " in err
    assert (f"sha256 verified); the run log's rows of {len({row[1] for row in redone})} later step(s), logged "
            "before the restart, moved to train_metrics_superseded") in err


def test_supersede_moves_the_rows_after_the_step_in_one_transaction(tmp_path):
    db = tmp_path / "run.db"
    with RunLog(db) as log:
        for step in (1, 2, 3):
            log.log_train(step, t_s=float(step), loss=1.0 / step)
        assert log.supersede_steps_after(1) == 2
        assert log.supersede_steps_after(1) == 0
        log.log_train(2, t_s=9.0, loss=0.25)
    assert _rows(db) == {(1.0, 1, "loss", 1.0), (9.0, 2, "loss", 0.25)}
    assert _rows(db, "train_metrics_superseded") == {(2.0, 2, "loss", 0.5), (3.0, 3, "loss", 1.0 / 3)}
