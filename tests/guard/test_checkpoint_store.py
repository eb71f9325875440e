"""Checkpoints are atomic, verified, pruned, and a resume never loads a corrupt one."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from gpuwise.guard import CheckpointStore, GuardError
from gpuwise.guard.rng import capture_rng_state, restore_rng_state


def _state(i: int) -> dict:
    return {"w": torch.full((256,), float(i)), "step": i, "nested": {"lr": 0.1, "ids": [1, 2, 3]}}


def test_save_keeps_newest_k_with_manifest_of_sizes_checksums_and_versions(tmp_path):
    store = CheckpointStore(tmp_path, keep=2)
    for step in (10, 20, 30):
        store.save(_state(step), step, epoch=step // 20, meta={"reason": "periodic"})
    assert [p.name for p in store.step_dirs()] == ["step-000000030", "step-000000020"]
    manifest = json.loads((tmp_path / "step-000000030" / "manifest.json").read_text())
    assert manifest["step"] == 30 and manifest["epoch"] == 1
    entry = manifest["files"]["state.pt"]
    assert entry["bytes"] == (tmp_path / "step-000000030" / "state.pt").stat().st_size
    assert len(entry["sha256"]) == 64
    assert manifest["torch_version"] == torch.__version__ and manifest["gpuwise_version"]
    assert manifest["meta"]["reason"] == "periodic" and manifest["total_bytes"] == entry["bytes"]
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("damage", ["flip_byte", "truncate", "no_manifest", "bad_manifest"])
def test_resume_skips_damaged_newest_checkpoint_and_says_why(tmp_path, damage):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(_state(1), 1, 0)
    newest = store.save(_state(2), 2, 0).path
    state_file, manifest = newest / "state.pt", newest / "manifest.json"
    if damage == "flip_byte":
        data = bytearray(state_file.read_bytes())
        data[len(data) // 2] ^= 0xFF
        state_file.write_bytes(bytes(data))
    elif damage == "truncate":
        state_file.write_bytes(state_file.read_bytes()[:100])
    elif damage == "no_manifest":
        manifest.unlink()
    else:
        manifest.write_text("{not json")
    ckpt, skipped = store.latest()
    assert ckpt is not None and ckpt.step == 1
    assert [s.path.name for s in skipped] == ["step-000000002"]
    expected = {"flip_byte": "checksum", "truncate": "bytes", "no_manifest": "no manifest",
                "bad_manifest": "unreadable manifest"}[damage]
    assert expected in skipped[0].reason
    assert torch.equal(store.load_state(ckpt)["w"], torch.full((256,), 1.0))


def test_unfinished_save_of_a_killed_process_is_never_listed_and_is_cleaned_up(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save(_state(5), 5, 0)
    tmp = store.begin(6)  # what a SIGKILL during a save leaves behind
    (tmp / "state.pt").write_bytes(b"half written")
    assert [p.name for p in store.step_dirs()] == ["step-000000005"]
    assert store.latest()[0].step == 5
    assert store.remove_stale_temporaries() == [tmp] and not tmp.exists()


def test_saving_the_same_step_again_replaces_it_atomically(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save(_state(1), 7, 0)
    store.save(_state(2), 7, 0)
    ckpt, skipped = store.latest()
    assert ckpt.step == 7 and not skipped and store.load_state(ckpt)["w"][0] == 2.0
    assert not list(tmp_path.glob(".old-*"))


def test_rng_state_round_trips_through_weights_only_load(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    store = CheckpointStore(tmp_path)
    ckpt = store.save({"rng": capture_rng_state()}, 1, 0)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    restore_rng_state(store.load_state(ckpt)["rng"])  # weights_only=True inside
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


def test_pickled_objects_are_refused_unless_trusted(tmp_path):
    store = CheckpointStore(tmp_path)
    ckpt = store.save({"obj": _Opaque()}, 1, 0)
    with pytest.raises(GuardError, match="weights_only"):
        store.load_state(ckpt)
    assert isinstance(store.load_state(ckpt, trust_pickle=True)["obj"], _Opaque)


class _Opaque:
    pass


def test_keep_must_be_positive(tmp_path):
    with pytest.raises(GuardError, match="keep"):
        CheckpointStore(tmp_path, keep=0)
