"""SIGTERM: a checkpoint at the next step boundary, then exit 75 ("restart me") within the grace period."""

from __future__ import annotations

import os
import re
import signal
import time

from gpuwise.guard import EXIT_RESTART, CheckpointStore, PreemptionHandler

from .helpers import steps_printed, wait_for


def test_sigterm_checkpoints_the_current_step_and_exits_with_restart_code(tmp_path, zygote):
    ckpt_dir = tmp_path / "ckpt"
    out, err = tmp_path / "run.out", tmp_path / "run.err"
    grace_s = 20.0
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
    # The step in progress when the signal came completes (the example prints after guard.step returns,
    # and guard.step exits right after saving it).
    assert ckpt.step == steps_printed(out)[-1] + 1
    assert ckpt.manifest.meta["reason"] == "preempted"
    assert re.search(r"exiting with code 75", err.read_text())


def test_grace_period_expiry_exits_with_restart_code_even_inside_a_slow_step(tmp_path, zygote):
    ckpt_dir = tmp_path / "ckpt"
    out, err = tmp_path / "run.out", tmp_path / "run.err"
    pid = zygote.start(["--checkpoint-dir", str(ckpt_dir), "--steps", "100", "--save-every", "1",
                        "--step-sleep-s", "30", "--grace-s", "1"], out, err)
    assert wait_for(lambda: len(steps_printed(out)) >= 1, 120)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)  # arrives while the (30 s) step sleeps
    status = zygote.wait()
    assert status == EXIT_RESTART, err.read_text()
    assert time.monotonic() - t0 < 15
    assert "grace period" in err.read_text()
    assert CheckpointStore(ckpt_dir).latest()[0].step == 1  # the last periodic checkpoint is intact


def test_handler_watches_a_configurable_signal_and_restores_the_previous_one():
    previous = signal.getsignal(signal.SIGUSR1)
    handler = PreemptionHandler(["USR1"], grace_s=0).install()
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        assert wait_for(lambda: handler.requested, 5)
        assert handler.signal_received == signal.SIGUSR1
    finally:
        handler.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == previous
