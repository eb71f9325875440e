"""The Hugging Face Trainer callback: sealed checkpoints, resume skips unsealed ones, SIGTERM saves and exits.

The Trainer itself needs ``accelerate`` (not a gpuwise dependency), so the test drives the callback through
transformers' own TrainerState / TrainerControl / CallbackHandler in the order the Trainer calls the hooks,
with checkpoint directories written the way the Trainer writes them (in place), rotated by transformers' own
rotation code at the end of its save, before ``on_save``, as ``Trainer._save_checkpoint`` does."""

from __future__ import annotations

import functools
import logging
import os
import sys
from types import SimpleNamespace

import pytest
import torch
from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

from gpuwise.guard.checkpoint import MANIFEST_FILE
from gpuwise.guard.integrations.hf import GuardCallback, latest_verified_checkpoint
from gpuwise.runlog import read_events, read_train_metrics


def _args(out_dir, save_total_limit=None):
    return SimpleNamespace(output_dir=str(out_dir), per_device_train_batch_size=4, gradient_accumulation_steps=2,
                           world_size=1, save_total_limit=save_total_limit)


def _trainer_save(args, state):
    """What Trainer._save_checkpoint writes, in place, and then deletes (its rotation), before it calls on_save."""
    path = _checkpoint_dir(args, state.global_step)
    path.mkdir(parents=True, exist_ok=True)
    torch.save({"w": torch.full((8,), float(state.global_step))}, path / "pytorch_model.bin")
    (path / "trainer_state.json").write_text('{"global_step": %d}' % state.global_step)
    _trainer_rotate(args, state)


def _trainer_rotate(args, state):
    """The end of ``Trainer._save_checkpoint``: transformers' own rotation (5.x: ``rotate_checkpoints``; 4.x: the
    Trainer's ``_rotate_checkpoints``), which does nothing when ``save_total_limit`` is None or <= 0."""
    try:
        from transformers.trainer_utils import rotate_checkpoints
    except ImportError:
        from transformers import Trainer

        trainer = SimpleNamespace(args=args, state=state)
        trainer._sorted_checkpoints = functools.partial(Trainer._sorted_checkpoints, trainer)
        Trainer._rotate_checkpoints(trainer, use_mtime=False, output_dir=args.output_dir)
    else:
        rotate_checkpoints(output_dir=args.output_dir, save_total_limit=args.save_total_limit,
                           best_model_checkpoint=state.best_model_checkpoint, use_mtime=False)


def _checkpoint_dir(args, step):
    from pathlib import Path

    return Path(args.output_dir) / f"checkpoint-{step}"


def _run(callback, args, max_steps, save_steps=2, resume_step=0, before=()):
    """The Trainer's loop, reduced to its callback calls (``resume_step``: the checkpoint it resumed from;
    ``before``: callbacks the Trainer calls ahead of ``callback``)."""
    handler = CallbackHandler([*before, callback], model=None, processing_class=None, optimizer=None,
                              lr_scheduler=None)
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


def test_lightning_callback_imports_without_lightning_and_says_how_to_get_it(tmp_path, monkeypatch):
    """Lightning is no gpuwise dependency (a dev one, for the real-Trainer tests): the module is loaded afresh
    where importing Lightning fails, as it does on a user's machine without it."""
    import importlib.util

    from gpuwise.guard import GuardError

    for name in ("lightning", "lightning.pytorch", "lightning.pytorch.callbacks", "pytorch_lightning",
                 "pytorch_lightning.callbacks"):
        monkeypatch.setitem(sys.modules, name, None)    # None in sys.modules: its import raises ImportError
    spec = importlib.util.find_spec("gpuwise.guard.integrations.lightning")
    guard_lightning = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard_lightning)
    assert not guard_lightning.LIGHTNING_AVAILABLE
    with pytest.raises(GuardError, match="pip install lightning"):
        guard_lightning.GuardLightningCallback(tmp_path)
    assert guard_lightning.latest_verified_checkpoint(tmp_path) is None


class _KilledInSave(Exception):
    """Stands for a SIGKILL between the Trainer's rotation and the callbacks' on_save."""


class _KillAtSave:
    """A callback the Trainer calls before GuardCallback: at ``step``'s on_save the process 'dies'."""

    def __init__(self, step):
        self.step = step

    def __getattr__(self, name):          # CallbackHandler calls every event on every callback
        return lambda *a, **kw: None

    def on_save(self, args, state, control, **kw):
        if state.global_step == self.step:
            raise _KilledInSave


@pytest.mark.parametrize("limit", [1, 2])
def test_a_kill_between_the_trainers_rotation_and_the_seal_leaves_a_sealed_checkpoint(tmp_path, limit):
    """The Trainer deletes the checkpoints beyond save_total_limit before on_save seals the new one: with its
    rotation on, a kill there left only the new, unsealed checkpoint. The callback rotates in its place."""
    args = _args(tmp_path / "out", save_total_limit=limit)
    with pytest.raises(_KilledInSave):
        _run(GuardCallback(), args, max_steps=10, save_steps=2, before=[_KillAtSave(6)])
    assert latest_verified_checkpoint(args.output_dir, verbose=False).endswith("checkpoint-4")


def test_the_callback_keeps_the_newest_sealed_checkpoints_and_gives_the_limit_back(tmp_path):
    args = _args(tmp_path / "out", save_total_limit=2)
    out = tmp_path / "out"
    (out / "checkpoint-100").mkdir(parents=True)   # unsealed, another run's leftover: older, as the Trainer ranks
    _run(GuardCallback(), args, max_steps=10, save_steps=2)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-10", "checkpoint-8"]
    assert args.save_total_limit == 2                        # the Trainer's own again after training


def test_pruning_never_deletes_the_newest_sealed_checkpoint_nor_the_best_one(tmp_path):
    args = _args(tmp_path / "out", save_total_limit=1)
    out = tmp_path / "out"

    class Best(GuardCallback):
        def on_save(self, args, state, control, **kw):
            state.best_model_checkpoint = str(out / "checkpoint-2")   # load_best_model_at_end's pick
            super().on_save(args, state, control, **kw)

    _run(Best(), args, max_steps=6, save_steps=2)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-2", "checkpoint-6"]
    # A sealed checkpoint damaged since (bit rot) does not count as kept: the older sealed one stays as well.
    os.utime(out / "checkpoint-2" / MANIFEST_FILE, (1_000_000, 1_000_000))   # sealed first, by the clock too
    with open(out / "checkpoint-6" / "pytorch_model.bin", "r+b") as f:
        f.seek(40)
        f.write(b"\x00\x01")
    _run(GuardCallback(), _args(out, save_total_limit=2), max_steps=8, save_steps=2, resume_step=6)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-2", "checkpoint-6", "checkpoint-8"]


def test_preemption_says_what_the_plain_guard_says(tmp_path, caplog):
    class PreemptedAtStep3(GuardCallback):
        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == 2:
                self.preemption.request()

    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"), pytest.raises(SystemExit):
        _run(PreemptedAtStep3(grace_s=0), _args(tmp_path / "out"), max_steps=50, save_steps=10)
    said = [r.getMessage() for r in caplog.records if r.name.startswith("gpuwise.guard")]
    assert said == ["signal received; checkpointing step 3", "exiting with code 75 (restart me to resume)"]


def test_with_the_real_trainer_a_kill_at_on_save_leaves_a_sealed_checkpoint(tmp_path):
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            return {"loss": (self.net(x).squeeze(-1) - labels).pow(2).mean()}

    class KillAtSave(TrainerCallback):
        def on_save(self, args, state, control, **kw):
            if state.global_step == 6:
                raise _KilledInSave

    def training_args():    # a process of its own each
        return TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=10, save_steps=2, save_total_limit=1,
                                 per_device_train_batch_size=4, report_to=[], use_cpu=True, disable_tqdm=True)

    data = [{"x": torch.randn(4), "labels": torch.tensor(0.0)} for _ in range(64)]
    args = training_args()
    trainer = Trainer(model=Model(), args=args, train_dataset=data, callbacks=[KillAtSave(), GuardCallback()])
    with pytest.raises(_KilledInSave):
        trainer.train()
    assert latest_verified_checkpoint(args.output_dir, verbose=False).endswith("checkpoint-4")
    args = training_args()
    trainer = Trainer(model=Model(), args=args, train_dataset=data, callbacks=[GuardCallback()])
    trainer.train(resume_from_checkpoint=latest_verified_checkpoint(args.output_dir))
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.startswith("checkpoint-")) == ["checkpoint-10"]
    assert args.save_total_limit == 1
