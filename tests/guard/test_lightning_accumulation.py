"""The Lightning callback saves only at gradient-accumulation boundaries, at most once per global step (as
Lightning's ModelCheckpoint), and a SIGTERM mid-accumulation saves at the next boundary.

Lightning is not a gpuwise dependency, so the callback is driven by a stand-in of Lightning 2.x's fit loop as far as
the callback sees it (``lightning/pytorch/loops/training_epoch_loop.py``): ``on_train_batch_end`` after every batch,
the optimizer stepped (``global_step`` + 1) after the batch that completes ``accumulate_grad_batches`` or an epoch's
last batch, before that batch's ``on_train_batch_end``; ``should_stop`` checked before the next batch. The last
test runs a real Lightning Trainer where Lightning is installed (skipped otherwise)."""

from __future__ import annotations

import logging

import pytest
import torch

from gpuwise.guard.integrations import lightning as guard_lightning
from gpuwise.runlog import read_train_metrics


class _Strategy:
    def barrier(self, name=None):
        pass

    def reduce_boolean_decision(self, decision, all=True):
        return decision


class _Trainer:
    """What the callback reads of ``lightning.pytorch.Trainer`` (one process)."""

    def __init__(self):
        self.global_step, self.current_epoch, self.world_size, self.is_global_zero = 0, 0, 1, True
        self.should_stop, self.optimizers, self.strategy = False, [], _Strategy()
        self.callback_metrics = {"loss": torch.tensor(0.5)}
        self.batch_idx = None
        self.saves = []            # (global step, batch index) of each save

    def save_checkpoint(self, path, weights_only=None):
        assert weights_only is False       # the full state, and Lightning's "not set" message never logged
        self.saves.append((self.global_step, self.batch_idx))
        torch.save({"global_step": self.global_step}, path)


def _fit(callback, trainer, *, accumulate, max_steps, batches_per_epoch=8, in_training_step=None):
    """Lightning's fit loop, reduced to what the callback sees."""
    callback.on_train_start(trainer, None)
    while not trainer.should_stop and trainer.global_step < max_steps:
        for batch_idx in range(batches_per_epoch):
            if trainer.should_stop or trainer.global_step >= max_steps:
                break
            trainer.batch_idx = batch_idx
            if in_training_step is not None:
                in_training_step(callback, trainer, batch_idx)
            if (batch_idx + 1) % accumulate == 0 or batch_idx + 1 == batches_per_epoch:
                trainer.global_step += 1                       # the optimizer step
            callback.on_train_batch_end(trainer, None, None, None, batch_idx)
        trainer.current_epoch += 1
    callback.on_train_end(trainer, None)


@pytest.fixture
def callback_class(monkeypatch):
    monkeypatch.setattr(guard_lightning, "LIGHTNING_AVAILABLE", True)
    return guard_lightning.GuardLightningCallback


def test_every_steps_saves_once_per_step_at_the_end_of_its_accumulation(tmp_path, callback_class):
    trainer = _Trainer()
    callback = callback_class(tmp_path / "ckpt", every_steps=3, keep=10, run_log=tmp_path / "run.db")
    _fit(callback, trainer, accumulate=2, max_steps=12)
    assert trainer.saves == [(3, 5), (6, 3), (9, 1), (12, 7)]      # the second micro-batch of each: the boundary
    assert [p.name for p in callback.store.step_dirs()] == [f"step-{s:09d}" for s in (12, 9, 6, 3)]
    assert [s for s, _, _ in read_train_metrics(tmp_path / "run.db")["loss"]] == list(range(1, 13))


def test_an_epochs_short_last_accumulation_is_a_boundary_too(tmp_path, callback_class):
    trainer = _Trainer()
    _fit(callback_class(tmp_path / "ckpt", every_steps=1, keep=10), trainer, accumulate=3, max_steps=6,
         batches_per_epoch=7)
    assert trainer.saves == [(1, 2), (2, 5), (3, 6), (4, 2), (5, 5), (6, 6)]


def test_sigterm_mid_accumulation_saves_at_the_next_boundary_and_exits_75(tmp_path, callback_class, caplog):
    def sigterm_in_first_micro_batch_of_step_5(callback, trainer, batch_idx):
        if trainer.global_step == 4 and batch_idx % 4 == 0:
            callback.preemption.request()

    trainer = _Trainer()
    callback = callback_class(tmp_path / "ckpt", every_steps=100, grace_s=0)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"), pytest.raises(SystemExit) as exit_info:
        _fit(callback, trainer, accumulate=4, max_steps=50, in_training_step=sigterm_in_first_micro_batch_of_step_5)
    assert exit_info.value.code == 75
    assert trainer.saves == [(5, 3)] and trainer.global_step == 5          # step 5 completed, then saved, once
    assert guard_lightning.latest_verified_checkpoint(tmp_path / "ckpt").endswith("step-000000005/state.ckpt")
    said = [r.getMessage() for r in caplog.records if r.name.startswith("gpuwise.guard")]
    assert said == ["signal received; checkpointing step 5", "exiting with code 75 (restart me to resume)"]


def test_sigterm_right_after_a_periodic_save_of_that_step_does_not_save_it_again(tmp_path, callback_class):
    def sigterm_after_step_4(callback, trainer, batch_idx):
        if trainer.global_step == 4 and batch_idx == 0:
            callback.preemption.request()

    trainer = _Trainer()
    callback = callback_class(tmp_path / "ckpt", every_steps=4, grace_s=0)
    with pytest.raises(SystemExit):
        _fit(callback, trainer, accumulate=2, max_steps=50, in_training_step=sigterm_after_step_4)
    assert trainer.saves == [(4, 7), (5, 1)]      # the signal's save is step 5's, at its boundary


def test_with_the_real_lightning_trainer(tmp_path):
    import lightning as L

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class Recorder(guard_lightning.GuardLightningCallback):
        saves = []

        def save(self, trainer, step, reason):
            self.saves.append((step, trainer.fit_loop.epoch_loop._should_accumulate()))
            super().save(trainer, step, reason)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(28, 4)), batch_size=2)
    callback = Recorder(tmp_path / "ckpt", every_steps=2, keep=10)
    trainer = L.Trainer(max_steps=9, accumulate_grad_batches=3, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[callback])
    trainer.fit(Model(), data)
    assert callback.saves == [(2, False), (4, False), (6, False), (8, False)]
