"""A run that diverged (NaN/Inf weights) saves no checkpoint of it: saved, such checkpoints verified and pushed the
finite ones out of ``keep``, leaving the resume nothing to fall back to (it refused them all and would not start)."""

from __future__ import annotations

import warnings

import pytest
import torch

from gpuwise.guard import Guard, GuardError

from .helpers import tiny_model


def _run(directory, *, diverge_after_step: int, steps: int, max_save_failures: int = 10) -> Guard:
    """``steps`` SGD steps saved every step (keep=2); the loss is infinite from step ``diverge_after_step`` + 1."""
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(directory, model, optimizer, every_steps=1, keep=2, max_save_failures=max_save_failures, verbose=False)
    guard.resume()
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    for _ in range(steps):
        scale = float("inf") if guard.step_count >= diverge_after_step else 1.0
        guard.step(x, lambda b: model(b).pow(2).mean() * scale)
    return guard


def test_diverged_steps_are_not_saved_and_the_last_finite_checkpoint_survives(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        guard = _run(tmp_path / "ckpt", diverge_after_step=3, steps=6)
        guard.close()
    refusals = [str(w.message) for w in caught if "NaN/Inf" in str(w.message)]
    assert refusals and all("previous checkpoint step-000000003 is intact" in m for m in refusals)
    assert "\n" not in refusals[0] and "step 4 not written" in refusals[0]
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("step-*")) == ["step-000000002", "step-000000003"]
    resumed = _run(tmp_path / "ckpt", diverge_after_step=10, steps=0)
    assert resumed.step_count == 3 and all(torch.isfinite(p).all() for p in resumed.model.parameters())
    resumed.close(save=False)


def test_a_run_that_keeps_diverging_stops_after_max_save_failures(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(GuardError, match=r"^3 checkpoint saves in a row failed.*NaN/Inf.*step-000000001 is intact$"):
            guard = _run(tmp_path / "ckpt", diverge_after_step=1, steps=6, max_save_failures=3)
            guard.close()


def test_a_finite_run_saves_as_before(tmp_path):
    guard = _run(tmp_path / "ckpt", diverge_after_step=10, steps=3)
    guard.close()
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("step-*")) == ["step-000000002", "step-000000003"]
