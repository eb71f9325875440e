"""A fresh start moves nothing in the run log (from the review): a second experiment starting from step 0 with a
run log an earlier one wrote left that one's metrics where `advise` reads them, and only a resume from a
checkpoint moves the rows of the steps it redoes, saying so in an event (``verbose`` or not). The Guard and the
HF callback (the Lightning one resumes through the same ``supersede_redone``)."""

from __future__ import annotations

import sqlite3

import torch

from gpuwise.guard import Guard
from gpuwise.runlog import read_events


def _train(directory, db, steps, *, every_steps=None, fail_at=None):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(directory, model, opt, run_log=str(db), verbose=False, every_steps=every_steps)
    guard.resume()
    for k in range(steps):
        if fail_at is not None and guard.step_count + 1 == fail_at:
            guard.close(save=False)       # the killed attempt: what it logged stays
            return
        guard.step(torch.randn(8, 4), lambda b: model(b).pow(2).mean())
    guard.close(save=False)


def _steps(db, table):
    with sqlite3.connect(db) as conn:
        return sorted(s for (s,) in conn.execute(f"SELECT DISTINCT step FROM {table}"))


def test_a_fresh_experiment_sharing_a_run_log_moves_none_of_the_earlier_ones_rows(tmp_path):
    db = tmp_path / "shared.db"
    _train(tmp_path / "a", db, 10)                     # experiment A
    _train(tmp_path / "b", db, 5)                      # experiment B: fresh, its own directory, the same log
    assert _steps(db, "train_metrics") == list(range(1, 11))
    assert _steps(db, "train_metrics_superseded") == []
    assert not [e for e in read_events(db) if "superseded" in e["message"]]


def test_a_quiet_resume_from_a_checkpoint_moves_the_redone_rows_and_records_it(tmp_path):
    db = tmp_path / "run.db"
    _train(tmp_path / "ckpt", db, 10, every_steps=4, fail_at=7)     # step-4 saved, steps 5 and 6 logged
    _train(tmp_path / "ckpt", db, 4, every_steps=4)                  # resumed at 4: redoes 5-6
    assert _steps(db, "train_metrics_superseded") == [5, 6]
    said = [e["message"] for e in read_events(db) if e["kind"] == "resumed"]
    assert len(said) == 1 and "rows of 2 later step(s), logged before the restart, moved to " \
                               "train_metrics_superseded" in said[0]


def test_the_hf_callback_moves_nothing_on_a_fresh_start_and_says_the_move_on_a_resume(tmp_path):
    from gpuwise.guard.integrations.hf import GuardCallback
    from tests.guard.test_framework_callbacks import _args, _run

    db = tmp_path / "run.db"
    _run(GuardCallback(run_log=db), _args(tmp_path / "a"), max_steps=5, save_steps=4)      # experiment A
    _run(GuardCallback(run_log=db), _args(tmp_path / "b"), max_steps=3, save_steps=4)      # a fresh B
    assert _steps(db, "train_metrics_superseded") == []
    assert not [e for e in read_events(db) if e["kind"] == "resumed"]
    _run(GuardCallback(run_log=db), _args(tmp_path / "a"), max_steps=6, save_steps=4, resume_step=4)
    assert _steps(db, "train_metrics_superseded") == [5]
    said = [e["message"] for e in read_events(db) if e["kind"] == "resumed"]
    assert len(said) == 1 and said[0].startswith("resumed at step 4; the run log's rows of 1 later step(s)")
