"""A guard-only run records in its run log how the training ended: finished, preempted, crashed, interrupted.

Before, a run without ``gpuwise run`` around it left a log that read the same whatever happened: meta held
``schema_version``, ``torch_version`` and ``cuda_version`` only, and no event said how it ended. Real
processes here (the atexit path and the preemption exit only exist in a process that ends), a real SIGTERM.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gpuwise.guard import Guard, GuardError
from gpuwise.runlog import read_events, read_meta

from .helpers import example_env, tiny_model

CHILD = textwrap.dedent("""
    import sys, time
    import torch
    from gpuwise.guard import Guard

    ckpt, log, how = sys.argv[1:4]
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(ckpt, model, opt, every_steps=100, run_log=log)
    x = torch.randn(4, 8)

    def loss_fn(b):
        if how == "loss_fn_error" and guard.step_count == 3:
            raise ValueError("bad\\nsample")
        return model(b).pow(2).mean()

    for i in range(5):
        guard.step(x, loss_fn)
        if how == "sigterm" and i == 2:
            print("ready", flush=True)
            while not guard.preemption.requested:   # SIGTERM arrives here; step 4 runs, is saved at the
                time.sleep(0.01)                    # next step() call, and the process exits 75
    if how == "user_error":
        raise RuntimeError("the user's own code failed")
    if how == "keyboard_interrupt":
        raise KeyboardInterrupt
    if how == "sys_exit":
        sys.exit(3)
    if how == "close":
        guard.close()
    # "no_close": the script ends without guard.close()
""")


def _end(log: Path) -> tuple[dict[str, str], list[str]]:
    meta = read_meta(log)
    return ({k: v for k, v in meta.items() if k in ("train_end", "train_end_step", "train_end_detail")},
            [e["message"] for e in read_events(log) if e["kind"] == "train_end"])


def _run(tmp_path: Path, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "ck"), str(tmp_path / "t.db"), how],
                          capture_output=True, text=True, env=example_env(), timeout=300)


@pytest.mark.parametrize("how, outcome, step, detail", [
    ("close", "finished", "5", ""),
    ("user_error", "crashed", "5", "RuntimeError: the user's own code failed"),
    ("loss_fn_error", "crashed", "3", "step 4 raised ValueError: bad sample"),
    ("keyboard_interrupt", "interrupted", "5", "KeyboardInterrupt"),
    ("sys_exit", "stopped", "5", "the process ended without guard.close()"),
    ("no_close", "stopped", "5", "the process ended without guard.close()"),
])
def test_run_log_records_how_a_guard_only_run_ended(tmp_path: Path, how: str, outcome: str, step: str,
                                                    detail: str) -> None:
    r = _run(tmp_path, how)
    meta, events = _end(tmp_path / "t.db")
    assert meta == {"train_end": outcome, "train_end_step": step, "train_end_detail": detail}, r.stderr[-2000:]
    assert events == [f"{outcome} at step {step}" + (f": {detail}" if detail else "")]


def test_preempted_run_records_its_checkpoint_and_exit_code(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "ck"), str(tmp_path / "t.db"), "sigterm"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=example_env())
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-2000:]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 75, err[-2000:]
    meta, events = _end(tmp_path / "t.db")
    assert meta == {"train_end": "preempted", "train_end_step": "4",
                    "train_end_detail": "checkpointed; exiting with code 75 to be restarted"}
    assert events == ["preempted at step 4: checkpointed; exiting with code 75 to be restarted"]


def test_with_block_error_is_recorded_as_crashed(tmp_path: Path) -> None:
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    with pytest.raises(OSError):
        with Guard(tmp_path / "ck", model, opt, run_log=tmp_path / "t.db") as guard:
            guard.step((x, torch.zeros(4, dtype=torch.long)), lambda b: model(b[0]).pow(2).mean())
            raise OSError("dataset file vanished")
    assert _end(tmp_path / "t.db") == ({"train_end": "crashed", "train_end_step": "1",
                                        "train_end_detail": "OSError: dataset file vanished"},
                                       ["crashed at step 1: OSError: dataset file vanished"])


def test_a_step_error_caught_by_the_loop_still_ends_finished(tmp_path: Path) -> None:
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = (torch.randn(4, 8), torch.zeros(4, dtype=torch.long))
    guard = Guard(tmp_path / "ck", model, opt, run_log=tmp_path / "t.db", save_on_crash=False)

    def bad(b):
        raise ValueError("skip me")

    with pytest.raises(ValueError):
        guard.step(batch, bad)
    guard.step(batch, lambda b: model(b[0]).pow(2).mean())
    guard.close()
    assert _end(tmp_path / "t.db") == ({"train_end": "finished", "train_end_step": "1", "train_end_detail": ""},
                                       ["finished at step 1"])


def test_every_save_failing_is_recorded_as_crashed(tmp_path: Path) -> None:
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(tmp_path / "ck", model, opt, run_log=tmp_path / "t.db")
    guard.step((torch.randn(4, 8), torch.zeros(4, dtype=torch.long)), lambda b: model(b[0]).pow(2).mean())

    def no_space(*args, **kwargs):
        raise GuardError(f"checkpoint of step 1 not written to {tmp_path / 'ck'}: No space left on device")

    guard.store.save = no_space
    with pytest.warns(UserWarning, match="No space left"), pytest.raises(GuardError, match="every checkpoint save"):
        guard.close()
    meta, events = _end(tmp_path / "t.db")
    assert (meta["train_end"], meta["train_end_step"]) == ("crashed", "1")
    assert meta["train_end_detail"].startswith("every checkpoint save of this run failed (1)")
    assert events == [f"crashed at step 1: {meta['train_end_detail']}"]
