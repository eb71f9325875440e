"""A sharded (DCP) resume refuses a state by the rule its save does (``state_file.state_nonfinite``): buffers too,
NaN only. Before, the resume checked parameters and optimizer state alone: a checkpoint with a NaN buffer, which the
save would have refused, resumed silently."""

from __future__ import annotations

import logging

import pytest
import torch

from gpuwise.guard import sharded

from .test_hostile_checkpoints import _close_guards, _guard, _train  # noqa: F401  - the autouse fixture


def _normed_model() -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 3))


def _save_unchecked(guard, monkeypatch) -> None:
    """What a gpuwise without the save-time check wrote: a checkpoint of step 3 that verifies."""
    guard.step_count = 3
    with monkeypatch.context() as unchecked:
        unchecked.setattr(sharded, "state_nonfinite", lambda model, state: [])
        guard.save()


def test_a_sharded_checkpoint_with_a_nan_buffer_is_refused_and_the_previous_one_resumed(tmp_path, monkeypatch, caplog):
    ckpt = tmp_path / "ckpt"
    guard = _train(ckpt, 2, sharded=True, model=_normed_model())       # DCP checkpoints of steps 1 and 2
    expected = {k: v.clone() for k, v in guard.model.state_dict().items()}
    guard.model[1].running_mean.fill_(float("nan"))
    _save_unchecked(guard, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        resumed = _guard(ckpt, sharded=True, model=_normed_model(), verbose=True)
        assert resumed.resume().path.name == "step-000000002"
    assert "refused step-000000003: holds NaN/Inf values (model.1.running_mean)" in caplog.text
    assert all(torch.equal(v, expected[k]) for k, v in resumed.model.state_dict().items())


@pytest.mark.parametrize("value", [float("-inf"), float("inf")])
def test_an_infinite_buffer_is_resumed_as_the_save_keeps_it(tmp_path, value):
    # a causal mask of -inf is legitimate: the save keeps it (buffers: NaN only), and so does the resume
    ckpt = tmp_path / "ckpt"
    guard = _train(ckpt, 2, sharded=True, model=_normed_model())
    guard.model[1].running_var.fill_(value)
    guard.step_count = 3
    guard.save()
    assert _guard(ckpt, sharded=True, model=_normed_model()).resume().path.name == "step-000000003"
