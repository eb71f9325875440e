"""A manifest whose step is not the step its directory is named for is refused: the checkpoint is skipped with a
one-line reason and the resume falls back, as for any other checkpoint that does not verify."""

from __future__ import annotations

import json

import pytest
import torch

from gpuwise.guard import CheckpointStore, Guard, GuardError

from .helpers import tiny_model


def _checkpoints(directory, steps) -> CheckpointStore:
    store = CheckpointStore(directory, keep=5)
    for step in steps:
        store.save({"progress": {"step": step}}, step, 0)
    return store


def _restep(ckpt_dir, step: int) -> None:
    path = ckpt_dir / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "step": step}))


def test_a_manifest_naming_another_step_than_its_directory_does_not_verify(tmp_path):
    store = _checkpoints(tmp_path / "ckpt", [100, 150])
    newest = tmp_path / "ckpt" / "step-000000150"
    _restep(newest, 999)
    with pytest.raises(GuardError, match=r"^step-000000150: manifest says step 999, its directory is of step 150$"):
        store.verify(newest)
    ckpt, skipped = store.latest()
    assert ckpt.step == 100 and ckpt.path.name == "step-000000100"
    assert [(s.path.name, s.reason) for s in skipped] == [
        ("step-000000150", "step-000000150: manifest says step 999, its directory is of step 150")]


def test_a_resume_skips_it_and_falls_back(tmp_path, caplog):
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(tmp_path / "ckpt", model, opt, keep=5)
    for _ in range(3):
        guard.step((torch.randn(4, 8), torch.randint(0, 3, (4,))), lambda b: model(b[0]).logsumexp(1).mean())
        guard.save(wait=True)
    guard.close()
    _restep(tmp_path / "ckpt" / "step-000000003", 999)
    resumed = Guard(tmp_path / "ckpt", model, opt)
    with caplog.at_level("WARNING", logger="gpuwise.guard"):
        ckpt = resumed.resume()
    resumed.close(save=False)
    assert ckpt.step == resumed.step_count == 2
    assert "skipped step-000000003: manifest says step 999, its directory is of step 3" in caplog.text
