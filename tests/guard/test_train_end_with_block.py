"""How a run ended when it leaves a ``with Guard(...)`` block: ``sys.exit`` is the program's chosen end, and a
step's own exception keeps the step that raised it.

Before, ``__exit__`` read every exception, ``SystemExit`` included, as a crash: ``sys.exit(0)`` inside the block was
``crashed`` (``SystemExit: 0``) with no final save, while the same exit without the block was ``stopped``; and a
step's exception lost its ``step N raised`` prefix. Real processes, as in ``test_train_end.py``: ``sys.exit`` and
an exception through ``__exit__`` only end that way in a process that ends.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuwise.guard.checkpoint import CheckpointStore
from gpuwise.runlog import read_events, read_meta

from .helpers import example_env

CHILD = textwrap.dedent("""
    import sys
    import torch
    from gpuwise.guard import Guard

    ckpt, log, how = sys.argv[1:4]
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)

    def loss_fn(b):
        if how == "step_error" and guard.step_count == 3:
            raise ValueError("bad\\nsample")
        if how in ("step_exit_0", "step_exit_0_without_with") and guard.step_count == 3:
            sys.exit(0)
        return model(b).pow(2).mean()

    def train():
        for _ in range(5):
            guard.step(x, loss_fn)
        if how.startswith("exit_"):
            sys.exit(int(how.split("_")[1]))

    if how.endswith("without_with"):
        guard = Guard(ckpt, model, opt, every_steps=100, run_log=log, save_on_crash=False)
        train()
    else:
        with Guard(ckpt, model, opt, every_steps=100, run_log=log, save_on_crash=False) as guard:
            train()
""")


def _run(tmp_path: Path, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "ck"), str(tmp_path / "t.db"), how],
                          capture_output=True, text=True, env=example_env(), timeout=300)


def _recorded(log: Path) -> tuple[str, str, str, list[str]]:
    meta = read_meta(log)
    events = [e["message"] for e in read_events(log) if e["kind"] == "train_end"]
    return meta.get("train_end"), meta.get("train_end_step"), meta.get("train_end_detail"), events


def _saved_step(directory: Path) -> int | None:
    ckpt, _ = CheckpointStore(directory).latest()
    return None if ckpt is None else ckpt.step


@pytest.mark.parametrize("how, exit_code, outcome, step, detail, saved_step", [
    # the program's chosen, successful end: finished, and the last step saved as at the block's own end
    ("exit_0", 0, "finished", "5", "sys.exit(0)", 5),
    # a failing exit code: stopped with the code (as without the block), no final save (a restart resumes)
    ("exit_3", 3, "stopped", "5", "sys.exit(3)", None),
    # the step's own exception: the step that raised it, as docs/guard.md shows
    ("step_error", 1, "crashed", "3", "step 4 raised ValueError: bad sample", None),
    # a clean exit raised inside a step left it incomplete: stopped, no final save (it recorded finished and exited
    # 0 with nothing saved, so a supervisor would not restart it and the steps were lost)
    ("step_exit_0", 0, "stopped", "3", "step 4 raised sys.exit(0)", None),
    # no with block, nothing calls close(): stopped, the step that raised the exit named
    ("step_exit_0_without_with", 0, "stopped", "3", "step 4 raised sys.exit(0)", None),
])
def test_with_block_records_sys_exit_as_chosen_end_and_step_error_with_its_step(
        tmp_path: Path, how: str, exit_code: int, outcome: str, step: str, detail: str, saved_step: int | None) -> None:
    r = _run(tmp_path, how)
    assert r.returncode == exit_code, r.stderr[-2000:]
    assert _recorded(tmp_path / "t.db") == (outcome, step, detail, [f"{outcome} at step {step}: {detail}"]), \
        r.stderr[-2000:]
    assert _saved_step(tmp_path / "ck") == saved_step
