"""A guarded job that ends through Python without closing its run log keeps every row it logged.

The run log commits on a timer, at most ``flush_interval_s`` after a row. Before, a process ending by an
uncaught exception, Ctrl-C or ``sys.exit`` within that second rolled the rows back: five quick steps and a
KeyboardInterrupt left ``train_metrics`` empty. Real processes and a real SIGINT here; each child sets the
timer an hour away, so only a commit on the way out can have kept the rows.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gpuwise.guard import Guard
from gpuwise.runlog import RunLog

from .helpers import example_env

CHILD = textwrap.dedent("""
    import sys, time
    import torch
    import gpuwise.runlog
    gpuwise.runlog.RunLog.__init__.__defaults__ = (3600.0,)   # the flush timer never fires in this test
    from gpuwise.guard import Guard

    ckpt, log, how = sys.argv[1:4]
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(ckpt, model, opt, every_steps=100, run_log=log)
    x = torch.randn(4, 8)
    for i in range(5):
        guard.step(x, lambda b: model(b).pow(2).mean())
    if how == "keyboard_interrupt":
        raise KeyboardInterrupt      # as Ctrl-C in the user's code after step 5
    if how == "error":
        raise RuntimeError("the user's own code failed")
    if how == "sys_exit":
        sys.exit(3)
    if how == "sigint":
        print("ready", flush=True)
        time.sleep(60)               # Ctrl-C arrives here (SIGINT is not a preemption signal by default)
    # "no_close": the script ends without guard.close()
""")


def _steps(log: Path) -> list[int]:
    with sqlite3.connect(log) as conn:
        return sorted({s for (s,) in conn.execute("SELECT step FROM train_metrics WHERE name = 'loss'")})


# An uncaught KeyboardInterrupt ends Python with SIGINT, or 1 where the SIGINT handler is not Python's own.
INTERRUPTED = (1, -signal.SIGINT)


@pytest.mark.parametrize("how, codes", [("keyboard_interrupt", INTERRUPTED), ("error", (1,)), ("sys_exit", (3,)),
                                        ("no_close", (0,))])
def test_rows_committed_when_the_process_ends_through_python(tmp_path: Path, how: str, codes: tuple) -> None:
    log = tmp_path / "t.db"
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "ck"), str(log), how], capture_output=True,
                       text=True, env=example_env(), timeout=300)
    assert r.returncode in codes, r.stderr[-2000:]
    assert _steps(log) == [1, 2, 3, 4, 5], r.stderr[-2000:]


def test_rows_committed_on_a_real_sigint(tmp_path: Path) -> None:
    log = tmp_path / "t.db"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "ck"), str(log), "sigint"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=example_env())
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-2000:]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in INTERRUPTED, err[-2000:]
    assert "KeyboardInterrupt" in err
    assert _steps(log) == [1, 2, 3, 4, 5], err[-2000:]


def test_a_step_that_raises_commits_the_steps_before_it(tmp_path: Path) -> None:
    """The guard's own exception path commits (the process may end next), KeyboardInterrupt included: the rows
    are readable from another connection while the process still runs, no exit needed."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    run_log = RunLog(tmp_path / "t.db", flush_interval_s=3600.0)
    guard = Guard(tmp_path / "ck", model, opt, run_log=run_log, save_on_crash=False, verbose=False)
    x = torch.randn(4, 8)
    for _ in range(3):
        guard.step(x, lambda b: model(b).pow(2).mean())

    def interrupted(batch: torch.Tensor) -> torch.Tensor:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        guard.step(x, interrupted)
    assert _steps(tmp_path / "t.db") == [1, 2, 3]
    guard.close(save=False)
    run_log.close()


def test_the_exit_flush_keeps_no_log_alive(tmp_path: Path) -> None:
    import gc
    import weakref

    run_log = RunLog(tmp_path / "t.db")
    ref = weakref.ref(run_log)
    run_log.close()
    del run_log
    gc.collect()
    assert ref() is None
    unclosed = RunLog(tmp_path / "u.db")
    ref = weakref.ref(unclosed)
    del unclosed   # no rows pending, so no timer holds it either
    gc.collect()
    assert ref() is None
