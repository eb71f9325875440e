"""The Hugging Face Trainer callback: sealed checkpoints, resume skips unsealed ones, SIGTERM saves and exits.

The Trainer itself needs ``accelerate`` (not a gpuwise dependency), so the test drives the callback through
transformers' own TrainerState / TrainerControl / CallbackHandler in the order the Trainer calls the hooks,
with checkpoint directories written the way the Trainer writes them (in place)."""

from __future__ import annotations

from importlib.util import find_spec
from types import SimpleNamespace

import pytest
import torch
from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

from gpuwise.guard.integrations.hf import GuardCallback, latest_verified_checkpoint
from gpuwise.runlog import read_events, read_train_metrics


def _args(out_dir):
    return SimpleNamespace(output_dir=str(out_dir), per_device_train_batch_size=4, gradient_accumulation_steps=2,
                           world_size=1)


def _trainer_save(args, state):
    """What Trainer._save_checkpoint writes, in place, before it calls on_save."""
    path = _checkpoint_dir(args, state.global_step)
    path.mkdir(parents=True)
    torch.save({"w": torch.full((8,), float(state.global_step))}, path / "pytorch_model.bin")
    (path / "trainer_state.json").write_text('{"global_step": %d}' % state.global_step)


def _checkpoint_dir(args, step):
    from pathlib import Path

    return Path(args.output_dir) / f"checkpoint-{step}"


def _run(callback, args, max_steps, save_steps=2, resume_step=0):
    """The Trainer's loop, reduced to its callback calls (``resume_step``: the checkpoint it resumed from)."""
    handler = CallbackHandler([callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    state, control = TrainerState(), TrainerControl()
    state.is_world_process_zero, state.global_step = True, resume_step
    control = handler.on_train_begin(args, state, control)
    for step in range(resume_step + 1, max_steps + 1):
        control = handler.on_step_begin(args, state, control)
        state.global_step, state.epoch = step, step / 8
        control = handler.on_step_end(args, state, control)
        control = handler.on_log(args, state, control, {"loss": 1.0 / step, "learning_rate": 1e-3, "grad_norm": 0.5})
        if step % save_steps == 0:
            control.should_save = True
        if control.should_save:
            _trainer_save(args, state)
            control = handler.on_save(args, state, control)
            control.should_save = False
        if control.should_training_stop:
            break
    handler.on_train_end(args, state, control)
    return state


def test_checkpoints_are_sealed_and_unsealed_ones_are_skipped_on_resume(tmp_path):
    args = _args(tmp_path / "out")
    _run(GuardCallback(run_log=tmp_path / "run.db"), args, max_steps=4)
    assert latest_verified_checkpoint(args.output_dir).endswith("checkpoint-4")
    metrics = read_train_metrics(tmp_path / "run.db")
    assert [v for _, _, v in metrics["loss"]] == [1.0, 0.5, pytest.approx(1 / 3), 0.25]
    assert metrics["batch_size"][0][2] == 8 and metrics["micro_batch_size"][0][2] == 4

    # Killed in the middle of the Trainer's save: a checkpoint directory without a manifest.
    (tmp_path / "out" / "checkpoint-6").mkdir()
    (tmp_path / "out" / "checkpoint-6" / "pytorch_model.bin").write_bytes(b"partial")
    # Bit rot or a truncated copy of a sealed one.
    with open(tmp_path / "out" / "checkpoint-4" / "pytorch_model.bin", "r+b") as f:
        f.seek(40)
        f.write(b"\x00\x01")
    assert latest_verified_checkpoint(args.output_dir).endswith("checkpoint-2")


def test_a_resumed_trainer_logs_each_step_once_and_keeps_the_redone_rows_apart(tmp_path):
    """Killed after logging step 5 with checkpoint-4 its newest; the resumed Trainer redoes step 5: the run log's
    train_metrics holds each step once, the killed attempt's step 5 kept in train_metrics_superseded."""
    import sqlite3

    args = _args(tmp_path / "out")
    _run(GuardCallback(run_log=tmp_path / "run.db"), args, max_steps=5, save_steps=4)
    _run(GuardCallback(run_log=tmp_path / "run.db"), args, max_steps=6, save_steps=4, resume_step=4)
    steps = [s for s, _, _ in read_train_metrics(tmp_path / "run.db")["loss"]]
    assert steps == [1, 2, 3, 4, 5, 6]
    with sqlite3.connect(tmp_path / "run.db") as db:
        moved = db.execute("SELECT DISTINCT step FROM train_metrics_superseded").fetchall()
    assert moved == [(5,)]


def test_preemption_signal_saves_at_the_next_step_and_exits_with_restart_code(tmp_path):
    class PreemptedAtStep5(GuardCallback):
        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == 4:
                self.preemption.request()  # what the SIGTERM handler does

    args = _args(tmp_path / "out")
    with pytest.raises(SystemExit) as exit_info:
        _run(PreemptedAtStep5(run_log=tmp_path / "run.db", grace_s=0), args, max_steps=50, save_steps=10)
    assert exit_info.value.code == 75
    assert latest_verified_checkpoint(args.output_dir).endswith("checkpoint-5")
    assert any(e["kind"] == "preempted" for e in read_events(tmp_path / "run.db"))


def test_lightning_callback_imports_without_lightning_and_says_how_to_get_it(tmp_path):
    from gpuwise.guard import GuardError
    from gpuwise.guard.integrations import lightning as guard_lightning

    if find_spec("lightning") or find_spec("pytorch_lightning"):     # an optional package, not a dependency
        pytest.skip("Lightning is installed here")
    assert not guard_lightning.LIGHTNING_AVAILABLE
    with pytest.raises(GuardError, match="pip install lightning"):
        guard_lightning.GuardLightningCallback(tmp_path)
    assert guard_lightning.latest_verified_checkpoint(tmp_path) is None
