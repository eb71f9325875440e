"""A checkpoint records the effective batch (samples per optimizer step over all ranks); a resume that trains with
another one says so once (a warning and a run-log event naming both), and goes on. Before, a 2-rank run at 64
resumed on 1 rank at 32 in silence: the learning-rate schedule was fitted to 64.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
import torch.nn.functional as F

from gpuwise.guard import Guard
from gpuwise.guard.checkpoint import CheckpointStore
from gpuwise.runlog import read_events

from .helpers import indexed_dataset, tiny_model


def _run(ck: Path, batch_size: int, steps: int, run_log: Path | None = None) -> Guard:
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = Guard(ck, model, opt, every_steps=2, run_log=run_log)
    guard.loader(indexed_dataset(48), batch_size=batch_size, seed=0)
    guard.resume()
    for batch in guard.batches(max_steps=steps):
        guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
    guard.close()
    return guard


def _changed(caplog, run_log: Path) -> tuple[list[str], list[str]]:
    said = [r.getMessage() for r in caplog.records if "effective batch" in r.getMessage()]
    logged = [e["message"] for e in read_events(run_log) if e["kind"] == "effective_batch_changed"]
    return said, logged


def _own_loop(ck: Path, batch_sizes: list[int], run_log: Path) -> Guard:
    """A loop of the user's own (no guard.loader): it steps with these batches, saving after each."""
    model = tiny_model()
    guard = Guard(ck, model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=1, keep=1, run_log=run_log)
    guard.resume()
    data = indexed_dataset(48)
    for n in batch_sizes:
        x, y, _ = data[:n]
        guard.step((x, y), lambda b: F.cross_entropy(model(b[0]), b[1]))
    guard.close()
    return guard


def _recorded(ck: Path) -> int:
    ckpt, _ = CheckpointStore(ck).latest()
    return ckpt.manifest.meta["effective_batch_size"]


def test_an_epochs_short_last_batch_in_a_loop_of_ones_own_is_no_change(tmp_path: Path, caplog) -> None:
    """40 samples at 16: steps of 16, 16, 8. The 8 used to become the checkpoint's effective batch, and the
    resume at 16 warned that the checkpoint was trained with 8."""
    ck = tmp_path / "ck"
    _own_loop(ck, [16, 16, 8], tmp_path / "a.db")
    assert _recorded(ck) == 16                       # the short batch does not lower it
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        _own_loop(ck, [16], tmp_path / "b.db")
        # a resume into an epoch's end: the first step is the short batch, the next a full one
        _own_loop(ck, [8], tmp_path / "c.db")
        assert _recorded(ck) == 16
        _own_loop(ck, [8, 16, 16], tmp_path / "d.db")
    for db in ("b.db", "c.db", "d.db"):
        assert _changed(caplog, tmp_path / db) == ([], [])
    assert _recorded(ck) == 16


def test_a_smaller_batch_in_a_loop_of_ones_own_is_said_at_the_second_step(tmp_path: Path, caplog) -> None:
    ck = tmp_path / "ck"
    _own_loop(ck, [16, 16], tmp_path / "a.db")
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        _own_loop(ck, [8, 8, 8], tmp_path / "b.db")
    said, logged = _changed(caplog, tmp_path / "b.db")
    assert len(said) == 1 and logged == said and "16 samples" in said[0] and "takes 8" in said[0]
    assert _recorded(ck) == 8
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        _own_loop(ck, [12], tmp_path / "c.db")        # larger: no short last batch, said at once
    said, _ = _changed(caplog, tmp_path / "c.db")
    assert len(said) == 1 and "8 samples" in said[0] and "takes 12" in said[0]


def test_the_checkpoint_records_the_effective_batch(tmp_path: Path) -> None:
    _run(tmp_path / "ck", batch_size=16, steps=2)
    ckpt, _ = CheckpointStore(tmp_path / "ck").latest()
    assert ckpt.manifest.meta["effective_batch_size"] == 16
    state = CheckpointStore(tmp_path / "ck").load_state(ckpt)
    assert state["progress"]["effective_batch_size"] == 16


def test_a_resume_with_another_effective_batch_says_so_once(tmp_path: Path, caplog) -> None:
    _run(tmp_path / "ck", batch_size=16, steps=2)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        guard = _run(tmp_path / "ck", batch_size=8, steps=6, run_log=tmp_path / "t.db")
    assert guard.step_count == 6
    said, logged = _changed(caplog, tmp_path / "t.db")
    assert len(said) == 1 and logged == said
    assert "16 samples" in said[0] and "takes 8" in said[0] and "learning-rate schedule was fitted to 16" in said[0]
    ckpt, _ = CheckpointStore(tmp_path / "ck").latest()
    assert ckpt.manifest.meta["effective_batch_size"] == 8   # the run goes on at its own batch


def test_same_batch_and_old_checkpoints_resume_silently(tmp_path: Path, caplog) -> None:
    _run(tmp_path / "ck", batch_size=16, steps=2)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        _run(tmp_path / "ck", batch_size=16, steps=4, run_log=tmp_path / "same.db")
    assert _changed(caplog, tmp_path / "same.db") == ([], [])

    # A checkpoint of an older gpuwise: no effective batch recorded
    store = CheckpointStore(tmp_path / "ck")
    ckpt, _ = store.latest()
    state = store.load_state(ckpt)
    del state["progress"]["effective_batch_size"]
    meta = {k: v for k, v in ckpt.manifest.meta.items() if k != "effective_batch_size"}
    store.save(state, ckpt.step + 1, ckpt.manifest.epoch, meta=meta)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        guard = _run(tmp_path / "ck", batch_size=8, steps=7, run_log=tmp_path / "old.db")
    assert guard.step_count == 7
    assert _changed(caplog, tmp_path / "old.db") == ([], [])
