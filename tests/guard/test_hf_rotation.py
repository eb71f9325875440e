"""The HF callback's rotation in place of the Trainer's ``save_total_limit``: which checkpoints it keeps, and where.

Driven like test_framework_callbacks.py: the Trainer's hook calls in its order, checkpoints written in place the way
``Trainer._save_checkpoint`` writes them, then transformers' own rotation, before ``on_save``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import torch
from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

from gpuwise.guard.checkpoint import MANIFEST_FILE, seal_directory
from gpuwise.guard.integrations.hf import GuardCallback, latest_verified_checkpoint

from .test_framework_callbacks import _args, _run, _trainer_rotate


def _sealed_before(out: Path, step: int, mtime: float) -> None:
    """A checkpoint an earlier run wrote and sealed at ``mtime`` (its manifest says so, and its file's time)."""
    path = out / f"checkpoint-{step}"
    path.mkdir(parents=True)
    torch.save({"w": torch.full((8,), float(step))}, path / "pytorch_model.bin")
    with mock.patch("gpuwise.guard.checkpoint.time.time", return_value=mtime):
        seal_directory(path, step)
    os.utime(path / MANIFEST_FILE, (mtime, mtime))


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("checkpoint-"))


def test_a_higher_numbered_checkpoint_from_an_earlier_run_does_not_push_out_the_new_ones(tmp_path):
    """The review's repro: with a sealed checkpoint-100 left in output_dir (another run, overwrite_output_dir),
    ranking by step number deleted each new checkpoint right after sealing it, leaving only checkpoint-100. The
    Trainer rotates by mtime: checkpoint-100 is the oldest and goes."""
    out = tmp_path / "out"
    _sealed_before(out, 100, mtime=1_000_000)
    _run(GuardCallback(), _args(out, save_total_limit=1), max_steps=10, save_steps=2)
    assert _names(out) == ["checkpoint-10"]
    assert latest_verified_checkpoint(out, verbose=False).endswith("checkpoint-10")


def test_checkpoints_of_earlier_runs_rank_by_when_they_were_sealed_not_by_step(tmp_path):
    """A roll-back: checkpoint-100 sealed, then the user resumed from checkpoint-4 (sealed later, say re-run), and
    now resumes from 4 again. Newest by seal time: 6 (this run), then 4; checkpoint-100 is the oldest."""
    out = tmp_path / "out"
    _sealed_before(out, 100, mtime=1_000_000)
    _sealed_before(out, 4, mtime=2_000_000)
    _run(GuardCallback(), _args(out, save_total_limit=2), max_steps=6, save_steps=2, resume_step=4)
    assert _names(out) == ["checkpoint-4", "checkpoint-6"]


def _search_trial(callback, args, run_dir: Path | None, trial_params, trial_name=None, max_steps=6, save_steps=2):
    """One trial of ``trainer.hyperparameter_search``, reduced to what the callback sees. The real search needs
    optuna or ray (not installed here), so this writes what the Trainer writes: ``init_training_references`` sets
    ``state.trial_params`` (and ``state.trial_name`` only when the search got ``hp_name``); ``_save_checkpoint``
    saves into ``_get_output_dir(trial)``, i.e. ``output_dir/<hp_name(trial)>`` or ``output_dir/run-<trial id>``
    (``run_dir`` here), writes ``trainer_state.json`` (trial_params included), rotates that directory with
    ``args.save_total_limit``, then calls ``on_save``. ``args`` is shared by the trials, as the Trainer's is."""
    handler = CallbackHandler([callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    state = TrainerState()
    state.is_world_process_zero, state.trial_params, state.trial_name = True, trial_params, trial_name
    control = handler.on_train_begin(args, state, TrainerControl())
    for step in range(1, max_steps + 1):
        state.global_step, state.epoch = step, step / 8
        control = handler.on_step_end(args, state, control)
        if step % save_steps == 0:
            path = run_dir / f"checkpoint-{step}"
            path.mkdir(parents=True)
            torch.save({"w": torch.full((8,), float(step))}, path / "pytorch_model.bin")
            state.save_to_json(str(path / "trainer_state.json"))
            _trainer_rotate(SimpleNamespace(output_dir=str(run_dir), save_total_limit=args.save_total_limit), state)
            control = handler.on_save(args, state, control)
    handler.on_train_end(args, state, control)


def test_under_a_hyperparameter_search_each_trials_checkpoints_are_sealed_and_rotated(tmp_path):
    """Without ``hp_name`` the Trainer saves into ``output_dir/run-<trial id>``: the callback looked only in
    output_dir, sealed nothing, and with the Trainer's rotation turned off every checkpoint stayed."""
    out = tmp_path / "out"
    args = _args(out, save_total_limit=1)
    callback = GuardCallback()
    for trial, lr in enumerate([1e-3, 3e-4]):
        _search_trial(callback, args, out / f"run-{trial}", {"learning_rate": lr})
    for trial in (0, 1):
        assert _names(out / f"run-{trial}") == ["checkpoint-6"]
        assert latest_verified_checkpoint(out / f"run-{trial}", verbose=False).endswith("checkpoint-6")
    assert args.save_total_limit == 1


def test_under_a_hyperparameter_search_with_hp_name_the_trials_directory_is_the_trial_name(tmp_path):
    out = tmp_path / "out"
    args = _args(out, save_total_limit=1)
    _search_trial(GuardCallback(), args, out / "lr-0.001", {"learning_rate": 1e-3}, trial_name="lr-0.001")
    assert _names(out / "lr-0.001") == ["checkpoint-6"]
    assert latest_verified_checkpoint(out / "lr-0.001", verbose=False).endswith("checkpoint-6")


def test_a_checkpoint_the_callback_cannot_find_hands_rotation_back_to_the_trainer(tmp_path, caplog):
    """Where the Trainer saved somewhere the callback cannot tell (say, a subclass's own ``_get_output_dir``), it
    cannot seal; rather than let checkpoints pile up with rotation turned off, it gives the limit back."""
    out = tmp_path / "out"
    args = _args(out, save_total_limit=1)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        _search_trial(GuardCallback(), args, out / "sweep" / "a", {"learning_rate": 1e-3})
    assert _names(out / "sweep" / "a") == ["checkpoint-6"]
    assert args.save_total_limit == 1
    said = [r.getMessage() for r in caplog.records if r.name.startswith("gpuwise.guard")]
    assert said == [f"checkpoint-2 not found under {out}: not sealed; save_total_limit rotation handed back to the "
                    "Trainer"]


def test_resume_after_a_roll_back_takes_the_newest_seal_as_the_rotation_keeps_it(tmp_path):
    """From the review: pruning kept checkpoints by when they were sealed while resume took the highest step, so
    after a roll-back to checkpoint-1000 (checkpoint-2000 of the abandoned run still on disk) a preemption resumed
    the abandoned run. Both now read when a checkpoint was sealed from its manifest, which a copy keeps."""
    out = tmp_path / "out"
    _sealed_before(out, 1000, mtime=1_000_000)
    _sealed_before(out, 2000, mtime=2_000_000)     # the abandoned run
    _sealed_before(out, 1100, mtime=3_000_000)     # the resumed run, after the roll-back
    assert latest_verified_checkpoint(out).endswith("checkpoint-1100")
    for step, copied_at in ((1100, 4_000_000), (2000, 5_000_000)):   # `cp -r` dates files by the copy, not the seal
        os.utime(out / f"checkpoint-{step}" / MANIFEST_FILE, (copied_at, copied_at))
    assert latest_verified_checkpoint(out).endswith("checkpoint-1100")
