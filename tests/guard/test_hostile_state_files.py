"""State files that verify but must not be loaded as they are: a zip bomb, bytes swapped after the check
(with trust_pickle=True), a symbolic link named like a checkpoint, and a state holding NaN/Inf."""

from __future__ import annotations

import io
import logging
import shutil
import zipfile

import pytest
import torch

from gpuwise.guard import CheckpointStore, GuardError, sharded

from .test_hostile_checkpoints import _OPEN, _RunsCode, _entry, _guard, _rewrite_manifest, _train  # noqa: F401
from .test_hostile_checkpoints import _close_guards  # noqa: F401  - the autouse fixture

INFLATED_BYTES = 64 << 20   # what the bomb's data.pkl inflates to (the refusal does not depend on the size)


def _deflate_with_padding(path) -> None:
    """Rewrite the torch.save archive at ``path`` with every entry deflate-compressed and ``data.pkl``
    padded with zeros after its STOP opcode (pickle ignores them): a small file that inflates hugely."""
    with zipfile.ZipFile(path) as src:
        entries = [(i.filename, src.read(i.filename)) for i in src.infolist()]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as dst:
        for name, data in entries:
            dst.writestr(name, data + bytes(INFLATED_BYTES) if name.endswith("data.pkl") else data)
    path.write_bytes(out.getvalue())


def test_a_deflate_compressed_state_file_is_refused_before_it_inflates(tmp_path, caplog):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    newest = ckpt / "step-000000002"
    _deflate_with_padding(newest / "state.pt")
    assert (newest / "state.pt").stat().st_size < (1 << 20)
    _rewrite_manifest(newest, lambda m: {**m, "files": {"state.pt": _entry(newest / "state.pt")}})
    refused = r"step-000000002: state.pt: entry '.*data.pkl' is deflate-compressed"
    with pytest.raises(GuardError, match=refused):
        CheckpointStore(ckpt).verify(newest)  # the manifest matches: only the archive's shape gives it away
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        assert _guard(ckpt, verbose=True).resume().path.name == "step-000000001"
    assert "skipped step-000000002: state.pt: entry 'archive/data.pkl' is deflate-compressed" in caplog.text


def test_a_state_file_swapped_for_a_bomb_after_verification_is_refused_at_load(tmp_path):
    store = CheckpointStore(tmp_path / "ckpt")
    ckpt = store.save({"w": torch.ones(4)}, 1, 0)
    _deflate_with_padding(ckpt.path / "state.pt")
    with pytest.raises(GuardError, match="deflate-compressed"):
        store.load_state(ckpt)


def test_trusted_pickle_is_loaded_from_the_bytes_that_were_hashed(tmp_path):
    store = CheckpointStore(tmp_path / "ckpt")
    store.save({"note": _Note("verified")}, 1, 0)
    ckpt, _ = store.latest()  # verified: sha256 of the file matches the manifest
    marker = tmp_path / "code-ran"
    swapped = tmp_path / "swapped.pt"
    torch.save({"note": _RunsCode(marker)}, swapped)
    swapped.replace(ckpt.path / "state.pt")  # a swap between the check and the load
    with pytest.raises(GuardError, match="checksum mismatch at load"):
        store.load_state(ckpt, trust_pickle=True)
    assert not marker.exists()


def test_trusted_pickle_loads_the_verified_object(tmp_path):
    store = CheckpointStore(tmp_path / "ckpt")
    ckpt = store.save({"note": _Note("verified")}, 1, 0)
    assert store.load_state(ckpt, trust_pickle=True)["note"].text == "verified"


class _Note:
    def __init__(self, text: str) -> None:
        self.text = text


def test_symlinked_checkpoints_are_never_followed_and_are_removed(tmp_path, caplog):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 2)
    outside = tmp_path / "outside" / "step-000000009"
    shutil.copytree(ckpt / "step-000000002", outside)  # a valid checkpoint, outside the directory
    link = ckpt / "step-000000009"
    link.symlink_to(outside)
    assert [p.name for p in CheckpointStore(ckpt).step_dirs()] == ["step-000000002", "step-000000001"]
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        guard = _guard(ckpt)
        assert guard.resume().path.name == "step-000000002"
    assert not link.is_symlink() and outside.is_dir()  # the link removed, its target untouched
    assert "step-000000009 is a symbolic link" in caplog.text
    link.symlink_to(outside)  # one made while the run goes on: the next save's prune removes it
    guard.save()
    assert not link.is_symlink() and (outside / "state.pt").is_file()


def _poison(directory, value: float) -> None:
    state = torch.load(directory / "state.pt", weights_only=True)
    state["model"] = {k: v.fill_(value) if k == "0.weight" else v for k, v in state["model"].items()}
    torch.save(state, directory / "state.pt")
    _rewrite_manifest(directory, lambda m: {**m, "files": {"state.pt": _entry(directory / "state.pt")}})


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_state_is_refused_and_the_previous_one_resumed(tmp_path, caplog, value):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 3)
    expected = torch.load(ckpt / "step-000000002" / "state.pt", weights_only=True)["model"]
    _poison(ckpt / "step-000000003", value)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        guard = _guard(ckpt, verbose=True)
        assert guard.resume().path.name == "step-000000002"
    assert "refused step-000000003: holds NaN/Inf values (model.0.weight)" in caplog.text
    assert all(torch.equal(v, expected[k]) for k, v in guard.model.state_dict().items())


def test_only_non_finite_checkpoints_refuse_to_start_fresh(tmp_path):
    ckpt = tmp_path / "ckpt"
    _train(ckpt, 1)
    _poison(ckpt / "step-000000001", float("nan"))
    with pytest.raises(GuardError, match="none verifies .*holds NaN/Inf values"):
        _guard(ckpt).resume()


def test_a_minus_inf_buffer_such_as_a_causal_mask_is_not_refused(tmp_path):
    def masked_model():
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
        model.register_buffer("mask", torch.full((4, 4), float("-inf")).triu(1))
        return model

    ckpt = tmp_path / "ckpt"
    _train(ckpt, 1, model=masked_model())
    assert _guard(ckpt, model=masked_model()).resume().path.name == "step-000000001"


def test_a_sharded_checkpoint_of_a_diverged_run_is_refused_and_the_previous_one_resumed(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    guard = _train(ckpt, 2, sharded=True)              # DCP checkpoints of steps 1 and 2
    expected = [p.detach().clone() for p in guard.model.parameters()]
    with torch.no_grad():
        next(guard.model.parameters()).fill_(float("nan"))
    guard.step_count = 3
    # what a run that diverged wrote before saves refused such states (a gpuwise without the save-time check): it
    # verifies
    with monkeypatch.context() as unchecked:
        unchecked.setattr(sharded, "state_nonfinite", lambda model, state: [])
        guard.save()
    resumed = _guard(ckpt, sharded=True)
    assert resumed.resume().path.name == "step-000000002"
    assert all(torch.equal(a, b) for a, b in zip(expected, resumed.model.parameters()))
    for older in ("step-000000001", "step-000000002"):
        shutil.rmtree(ckpt / older)
    with pytest.raises(GuardError, match="holds NaN/Inf values .*the sharded model now holds those values"):
        _guard(ckpt, sharded=True).resume()
