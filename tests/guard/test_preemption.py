"""SIGTERM: a checkpoint at the next step boundary, then exit 75 ("restart me") within the grace period."""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from pathlib import Path

import torch

from gpuwise.guard import EXIT_RESTART, CheckpointStore, Guard, PreemptionHandler

from .helpers import steps_printed, tiny_model, wait_for

JOB = Path(__file__).with_name("guarded_job.py")


def test_sigterm_checkpoints_the_current_step_and_exits_with_restart_code(tmp_path, zygote):
    ckpt_dir = tmp_path / "ckpt"
    out, err = tmp_path / "run.out", tmp_path / "run.err"
    grace_s = 60.0   # far past what the checkpoint and exit take on a loaded machine: "within" is no race
    pid = zygote.start(["--checkpoint-dir", str(ckpt_dir), "--steps", "100000", "--save-every", "100000",
                        "--step-sleep-s", "0.02", "--grace-s", str(grace_s)], out, err)
    assert wait_for(lambda: len(steps_printed(out)) >= 5, 120)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    status = zygote.wait()
    elapsed_s = time.monotonic() - t0
    assert status == EXIT_RESTART == 75, err.read_text()
    assert elapsed_s < grace_s
    ckpt, skipped = CheckpointStore(ckpt_dir).latest()
    assert ckpt is not None and not skipped
    # The step in progress when the signal came completes, and so does the caller's code for it (the example
    # prints after guard.step returns): the checkpoint and the exit come when the loop asks for the next batch.
    assert ckpt.step == steps_printed(out)[-1]
    assert ckpt.manifest.meta["reason"] == "preempted"
    assert re.search(r"exiting with code 75", err.read_text())


def _stuck_in_a_step(tmp_path, zygote, *args: str) -> tuple[int, str, float]:
    """The job stuck inside step 3's loss_fn (a 300 s sleep) gets SIGTERM with a grace period of 1 s."""
    ckpt_dir = tmp_path / "ckpt"
    out, err = tmp_path / "run.out", tmp_path / "run.err"
    pid = zygote.start([str(ckpt_dir), "100", "--slow-at", "3", "--grace-s", "1", *args], out, err, script=JOB)
    assert wait_for(lambda: out.exists() and "slow" in out.read_text(), 120)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)  # arrives while step 3 is stuck
    status = zygote.wait()
    return status, err.read_text(), time.monotonic() - t0


def test_grace_period_expiry_exits_with_restart_code_even_inside_a_slow_step(tmp_path, zygote):
    status, err, elapsed_s = _stuck_in_a_step(tmp_path, zygote, "--every", "1")
    assert status == EXIT_RESTART, err
    assert elapsed_s < 60   # the 1 s grace, with room for a loaded machine; the stuck step would take 300 s
    # step 2's checkpoint was written when step 3's batch was asked for; the stuck step 3 never completed
    assert "grace period of 1s ran out; exiting with 75 (the last complete checkpoint, step-000000002, is " \
           "intact: the restart resumes from it)" in err
    assert CheckpointStore(tmp_path / "ckpt").latest()[0].step == 2


def test_grace_period_expiry_before_any_checkpoint_says_the_run_restarts_from_step_0(tmp_path, zygote):
    # the defect: "the last complete checkpoint is intact" when there was none
    status, err, _ = _stuck_in_a_step(tmp_path, zygote, "--every", "100")
    assert status == EXIT_RESTART, err
    assert "(no complete checkpoint yet: the run restarts from step 0)" in err and "intact" not in err
    assert CheckpointStore(tmp_path / "ckpt").latest() == (None, [])


def test_a_grace_period_shorter_than_a_measured_save_is_warned_about(tmp_path, caplog):
    model = tiny_model()
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), grace_s=1e-6)
    try:
        with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
            guard.save()
            guard.save()
    finally:
        guard.close()
    warned = [r.getMessage() for r in caplog.records if "grace_s=" in r.getMessage()]
    assert len(warned) == 1, "once per run"
    assert re.match(r"grace_s=1e-06s is shorter than the last checkpoint save took \(\d+\.\d\ds\)", warned[0])


def test_handler_watches_a_configurable_signal_and_restores_the_previous_one():
    previous = signal.getsignal(signal.SIGUSR1)
    handler = PreemptionHandler(["USR1"], grace_s=0).install()
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert wait_for(lambda: handler.requested, 60)
        assert handler.signal_received == signal.SIGUSR1
    finally:
        handler.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == previous
