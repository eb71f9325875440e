"""Checkpoints written by someone else (a shared disk, a copied directory, an attacker): a resume falls back
to an older checkpoint or refuses in one line, never runs code, never loads a file the manifest did not
verify, never prunes the checkpoint it would resume from."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess

import pytest
import torch
import torch.nn.functional as F

from gpuwise.guard import CheckpointStore, Guard, GuardError
from gpuwise.guard.storage import sha256_file

from .helpers import EXAMPLE, PYTHON, example_env, indexed_dataset, tiny_model


_OPEN: list[Guard] = []


@pytest.fixture(autouse=True)
def _close_guards():
    """Every Guard a test left open stops watching signals (no handler outlives its test)."""
    yield
    while _OPEN:
        _OPEN.pop().preemption.uninstall()


def _guard(directory, **kw) -> Guard:
    model = kw.pop("model", None) or tiny_model(seed=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kw.setdefault("verbose", False)
    guard = Guard(directory, model, opt, every_steps=1, **kw)
    guard.loader(indexed_dataset(40), batch_size=8, seed=2)
    _OPEN.append(guard)
    return guard


def _train(directory, steps: int, **kw) -> Guard:
    guard = _guard(directory, **kw)
    guard.resume()
    for batch in guard.batches(max_steps=steps):
        guard.step(batch, lambda b: F.cross_entropy(guard.model(b[0]), b[1]))
    guard.close()
    return guard


def _rewrite_manifest(ckpt_dir, edit) -> None:
    path = ckpt_dir / "manifest.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def _entry(path) -> dict:
    return {"bytes": path.stat().st_size, "sha256": sha256_file(path)}


class _RunsCode:
    """A pickle payload that creates a file when unpickled."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_crafted_sharded_metadata_is_refused_without_running_code(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2, sharded=True)
    newest = ckpt / "step-000000002"
    marker = tmp_path / "ran"
    (newest / ".metadata").write_bytes(pickle.dumps(_RunsCode(marker)))
    _rewrite_manifest(newest, lambda m: {**m, "files": {**m["files"], ".metadata": _entry(newest / ".metadata")}})
    guard = _guard(ckpt, sharded=True)
    resumed = guard.resume()
    assert not marker.exists(), "unpickling the checkpoint ran code"
    assert resumed.path.name == "step-000000001" and guard.step_count == 1
    _, skipped = CheckpointStore(ckpt).latest()
    assert "system is not allowed" in skipped[0].reason


def test_manifest_naming_files_outside_the_checkpoint_is_corrupt(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    newest = ckpt / "step-000000002"
    (newest / "state.pt").write_bytes(b"poison")
    outside = {"../step-000000001/state.pt": _entry(ckpt / "step-000000001" / "state.pt")}
    _rewrite_manifest(newest, lambda m: {**m, "files": outside})
    guard = _guard(ckpt)
    assert guard.resume().path.name == "step-000000001"
    assert "outside the checkpoint" in CheckpointStore(ckpt).latest()[1][0].reason


def test_state_file_the_manifest_does_not_cover_is_never_loaded(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    newest = ckpt / "step-000000002"
    poisoned = {k: (v.fill_(float("nan")) if torch.is_tensor(v) else v) for k, v in tiny_model().state_dict().items()}
    state = torch.load(newest / "state.pt", weights_only=True)
    state["model"] = poisoned
    torch.save(state, newest / "state.pt")
    (newest / "note.txt").write_text("covered")
    _rewrite_manifest(newest, lambda m: {**m, "files": {"note.txt": _entry(newest / "note.txt")}})
    guard = _guard(ckpt)
    assert guard.resume().path.name == "step-000000001"
    assert all(torch.isfinite(p).all() for p in guard.model.parameters())


def test_symlinked_state_file_is_corrupt(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    newest = ckpt / "step-000000002"
    target = tmp_path / "elsewhere.pt"
    (newest / "state.pt").rename(target)
    (newest / "state.pt").symlink_to(target)
    assert _guard(ckpt).resume().path.name == "step-000000001"


@pytest.mark.parametrize("manifest", [
    [1, 2, 3],
    {"step": 2, "epoch": 0, "time_s": 0.0, "files": {"state.pt": "abc"}},
    {"step": 2, "epoch": 0, "time_s": 0.0, "files": {"state.pt": {"bytes": "many", "sha256": "0" * 64}}},
    {"step": "two", "epoch": 0, "time_s": 0.0, "files": {}},
    {"step": 2, "epoch": 0, "time_s": float("nan"), "files": {"state.pt": {"bytes": 1, "sha256": "0" * 64}}},
    {"step": 2, "epoch": 0, "time_s": 0.0, "files": [["state.pt", 1]]},
], ids=["list", "entry-string", "bytes-text", "step-text", "time-nan", "files-list"])
def test_manifest_of_the_wrong_shape_falls_back_to_the_previous_checkpoint(tmp_path, manifest):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    (ckpt / "step-000000002" / "manifest.json").write_text(json.dumps(manifest))
    guard = _guard(ckpt)
    assert guard.resume().path.name == "step-000000001"


def test_refuses_to_start_fresh_over_checkpoints_that_all_fail_to_verify(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    for d in CheckpointStore(ckpt).step_dirs():
        (d / "state.pt").write_bytes(b"zeroed")
    with pytest.raises(GuardError, match=r"2 checkpoint\(s\).*none verifies.*step-000000002.*allow_fresh"):
        _guard(ckpt).resume()
    assert len(CheckpointStore(ckpt).step_dirs()) == 2, "a refused resume must delete nothing"


def test_fresh_start_over_corrupt_checkpoints_keeps_its_own_new_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 5)
    for d in CheckpointStore(ckpt).step_dirs():
        (d / "state.pt").write_bytes(b"zeroed")
    guard = _train(ckpt, 1, allow_fresh=True, keep=1)
    assert guard.step_count == 1
    ckpt_found, _ = CheckpointStore(ckpt).latest()
    assert ckpt_found is not None and ckpt_found.step == 1, "keep-K deleted the only checkpoint that verifies"


def test_pruning_never_deletes_the_newest_verified_checkpoint(tmp_path):
    store = CheckpointStore(tmp_path, keep=1)
    store.save({"w": torch.ones(3)}, 1, 0)
    for step in (7, 8):
        store.save({"w": torch.zeros(3)}, step, 0)
        (tmp_path / f"step-{step:09d}" / "state.pt").write_bytes(b"rot")
    store._verified.clear()  # as a new process would see the directory
    store.save({"w": torch.full((3,), 2.0)}, 2, 0)
    names = [p.name for p in store.step_dirs()]
    assert "step-000000002" in names and "step-000000001" not in names
    assert store.latest()[0].step == 2


# The example with every checkpoint write failing as on a full disk (ENOSPC), in a real process.
_DISK_FULL = """
import errno, runpy, sys
from gpuwise.guard import storage
def write(self, data):
    raise OSError(errno.ENOSPC, "No space left on device")
storage.HashingWriter.write = write
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow  # a real process of the example (a torch import)
def test_every_save_failing_ends_the_run_non_zero(tmp_path):
    done = subprocess.run([PYTHON, "-c", _DISK_FULL, str(EXAMPLE), "--checkpoint-dir", str(tmp_path / "ckpt"),
                           "--steps", "2", "--save-every", "1", "--hidden", "8", "--samples", "64"],
                          capture_output=True, text=True, env=example_env(), timeout=300)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "every checkpoint save of this run failed" in last and "Traceback" not in done.stderr


@pytest.mark.slow  # a real process of the example (a torch import)
def test_an_unusable_checkpoint_directory_ends_the_run_before_it_starts(tmp_path):
    # the defect: found only at the first save, after the first steps ran
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the checkpoint directory's parent should be")
    done = subprocess.run([PYTHON, str(EXAMPLE), "--checkpoint-dir", str(blocker / "ckpt"), "--steps", "2",
                           "--save-every", "1", "--hidden", "8", "--samples", "64"],
                          capture_output=True, text=True, env=example_env(), timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"gpuwise.guard: error: checkpoint directory {blocker / 'ckpt'} cannot be "
                                        f"created: Not a directory ({blocker} is a file, not a directory)"]
    assert "step=" not in done.stdout


def test_saves_failing_in_a_row_stop_the_run_at_the_limit(tmp_path):
    guard = _guard(tmp_path / "ckpt", max_save_failures=2)
    (tmp_path / "ckpt" / ".gpuwise-lock").unlink()  # the run's lock file (docs/guard.md: one run per directory)
    (tmp_path / "ckpt").rmdir()
    (tmp_path / "ckpt").write_text("x")  # the folder became a file after the start: every save fails
    batches = guard.batches(max_steps=10)
    guard.step(next(batches), lambda b: F.cross_entropy(guard.model(b[0]), b[1]))
    with pytest.warns(UserWarning, match=r"step 1 not written") as caught:
        batch = next(batches)  # step 1's checkpoint is written when the loop asks for the next batch
    assert caught[0].filename == __file__, "the warning names the user's line"
    guard.step(batch, lambda b: F.cross_entropy(guard.model(b[0]), b[1]))
    with pytest.raises(GuardError, match="2 checkpoint saves in a row failed"):
        next(batches)
    assert guard.step_count == 2


def test_verified_bytes_that_are_not_a_guard_state_are_refused_in_one_line(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 1)
    only = ckpt / "step-000000001"
    torch.save({"x": torch.ones(1)}, only / "state.pt")
    _rewrite_manifest(only, lambda m: {**m, "files": {"state.pt": _entry(only / "state.pt")}})
    with pytest.raises(GuardError, match="holds no model state"):
        _guard(ckpt).resume()


def test_a_checkpoint_of_another_model_is_refused_in_one_line_naming_what_does_not_fit(tmp_path):
    # the defect: only the first line of load_state_dict's error was kept ("Error(s) in loading state_dict
    # for Linear:"), none of the keys or shapes that tell which model the checkpoint is of
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 1)  # tiny_model: 0.weight [16, 8], 0.bias [16], 3.weight [3, 16], 3.bias [3]
    with pytest.raises(GuardError, match=r"step-000000001 verifies but does not fit this model: ") as other:
        _guard(ckpt, model=torch.nn.Linear(8, 3)).resume()
    message = str(other.value)
    assert "\n" not in message
    assert "2 missing keys (weight, bias)" in message
    assert "4 unexpected keys (0.weight, 0.bias, 3.weight, … 1 more)" in message

    wider = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Dropout(0.0), torch.nn.Linear(32, 3),
                                torch.nn.Linear(3, 3))
    with pytest.raises(GuardError) as shapes:
        _guard(ckpt, model=wider).resume()
    message = str(shapes.value)
    assert "\n" not in message
    assert "2 missing keys (4.weight, 4.bias)" in message and "unexpected" not in message
    assert ("3 shape mismatches (0.weight: checkpoint [16, 8] vs model [32, 8], 0.bias: checkpoint [16] vs "
            "model [32], 3.weight: checkpoint [3, 16] vs model [3, 32])") in message


def test_a_sharded_guard_refuses_a_plain_checkpoint_in_one_line(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 1)
    with pytest.raises(GuardError, match="is a 'torch.save' checkpoint; this Guard \\(sharded=True\\)"):
        _guard(ckpt, sharded=True).resume()


def test_unreadable_manifests_are_named_once_and_each_reason_whole(tmp_path):
    # "skipped step-000000002: step-000000002: ..." and a reason cut mid-parenthesis at 100 characters
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    for d in CheckpointStore(ckpt).step_dirs():
        (d / "manifest.json").write_text("")          # not JSON
    said = []

    class Said(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())

    logger = logging.getLogger("gpuwise.guard")
    handler = Said()
    logger.addHandler(handler)
    try:
        with pytest.raises(GuardError) as err:
            _guard(ckpt, verbose=True).resume()
    finally:
        logger.removeHandler(handler)
    assert "manifest is not JSON (Expecting value: line 1 column 1 (char 0))" in str(err.value)
    skipped = [m for m in said if m.startswith("skipped ")]
    assert skipped and all(m.count("step-00000000") == 1 for m in skipped), skipped
