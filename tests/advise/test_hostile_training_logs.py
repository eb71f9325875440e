"""Training logs no run could have written: one line naming the row (exit 2), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuwise.advise.errors import AdviseError
from gpuwise.advise.readers import read_log
from gpuwise.runlog import RunLog


def test_deeply_nested_jsonl_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n' + '{"step": 2, "loss": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(AdviseError, match=r"log.jsonl:2: .*nested too deeply"):
        read_log(path)


@pytest.mark.parametrize("record, problem", [
    ({"step": 1e300, "loss": 1.0}, r"above 2\^53 = 9,007,199,254,740,992"),   # was "not a whole number of steps"
    ({"step": 1.5, "loss": 1.0}, "not a whole number of steps"),
    ({"step": -3, "loss": 1.0}, "not a whole number of steps"),
    ({"step": 1, "loss": 1.0, "batch_size": 0}, "not a batch size >= 1"),
    ({"step": 1, "loss": 1.0, "lr": -0.1}, "not a learning rate >= 0"),
    ({"step": 1, "loss": {"nested": 1}}, "not a number"),
    ({"step": 1, "loss": 10**400}, "too large"),
], ids=["step-1e300", "step-fraction", "step-negative", "batch-0", "lr-negative", "loss-object", "loss-huge-int"])
def test_values_out_of_range_are_refused_naming_the_line(tmp_path, record, problem):
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"step": 0, "loss": 3.0}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(AdviseError, match=rf"log.jsonl:2: .*{problem}"):
        read_log(path)


def test_run_log_metric_of_the_wrong_type_is_refused(tmp_path):
    db = tmp_path / "run.db"
    with RunLog(db) as log:
        log.log_train(1, loss=2.0)
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO train_metrics VALUES (1.0, 2, 'loss', 'low')")
    with pytest.raises(AdviseError, match="value 'low' is not a number"):
        read_log(db)


def test_nan_target_loss_exits_2_with_one_line(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{3.0 / (s + 1):.4f}\n" for s in range(50)))
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "advise", str(path), "--target-loss", "nan"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--target-loss" in done.stderr
