"""A scheduler the guard cannot step (ReduceLROnPlateau steps on a metric) and a loader it cannot resume (a plain
DataLoader) are refused in one GuardError line when handed over, not met as a TypeError half-way through the first
step (after the optimizer step) or an AttributeError at its end."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from gpuwise.guard import Guard, GuardError

from .helpers import indexed_dataset, tiny_model


def test_reduce_lr_on_plateau_is_refused_before_the_directory_is_made(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    with pytest.raises(GuardError, match=r"^scheduler=ReduceLROnPlateau: its step\(\) needs metrics.*extra_state") as info:
        Guard(tmp_path / "ckpt", model, optimizer, scheduler=plateau, verbose=False)
    assert "\n" not in str(info.value) and not (tmp_path / "ckpt").exists()


def test_an_object_without_step_is_refused_as_scheduler(tmp_path):
    model = tiny_model()
    with pytest.raises(GuardError, match="^scheduler must have a step"):
        Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), scheduler=0.1, verbose=False)


def test_a_per_step_scheduler_is_stepped_once_per_optimizer_step(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    guard = Guard(tmp_path / "ckpt", model, optimizer, scheduler=scheduler, verbose=False)
    for _ in range(2):
        guard.step(torch.randn(4, 8), lambda b: model(b).pow(2).mean())
    guard.close(save=False)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 2)


def test_a_plain_dataloader_is_refused_by_attach_loader(tmp_path):
    model = tiny_model()
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False)
    plain = DataLoader(indexed_dataset(), batch_size=8, shuffle=True)
    with pytest.raises(GuardError, match=r"^attach_loader takes a gpuwise ResumableDataLoader, got DataLoader: .*"
                                         r"guard\.loader\(") as info:
        guard.attach_loader(plain)
    assert "\n" not in str(info.value)
    with pytest.raises(GuardError, match="before guard.batches"):  # nothing was attached
        next(guard.batches(max_steps=1))
    guard.close(save=False)
