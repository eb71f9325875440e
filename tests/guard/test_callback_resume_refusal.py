"""The HF and Lightning ``latest_verified_checkpoint`` follow ``Guard.resume``'s rule: checkpoints exist and none
verifies is a one-line GuardError, not None (``trainer.train(resume_from_checkpoint=None)`` would start from step 0
over them, and the Trainer's rotation then delete them), unless ``allow_fresh=True``; an empty or absent directory
(a first run) is None."""

from __future__ import annotations

import pytest
import torch

from gpuwise.guard import CheckpointStore, GuardError
from gpuwise.guard.checkpoint import seal_directory
from gpuwise.guard.integrations import hf, lightning

_REFUSAL = (r"^1 checkpoint\(s\) in .* and none verifies \(checkpoint-6: no manifest\): refusing to start from "
            r"step 0 over them; pass latest_verified_checkpoint\(\.\.\., allow_fresh=True\) to start over$")


def _hf_cut_short(out):
    (out / "checkpoint-6").mkdir(parents=True)
    (out / "checkpoint-6" / "pytorch_model.bin").write_bytes(b"partial")   # no manifest: a kill mid-save
    return out


def test_hf_refuses_when_checkpoints_exist_and_none_verifies(tmp_path):
    out = _hf_cut_short(tmp_path / "out")
    with pytest.raises(GuardError, match=_REFUSAL):
        hf.latest_verified_checkpoint(out, verbose=False)
    assert hf.latest_verified_checkpoint(out, verbose=False, allow_fresh=True) is None


def test_hf_refuses_a_sealed_checkpoint_that_no_longer_verifies(tmp_path):
    out = tmp_path / "out"
    (out / "checkpoint-4").mkdir(parents=True)
    torch.save({"w": torch.zeros(8)}, out / "checkpoint-4" / "pytorch_model.bin")
    seal_directory(out / "checkpoint-4", 4)
    (out / "checkpoint-4" / "pytorch_model.bin").write_bytes(b"truncated")
    with pytest.raises(GuardError, match=r"none verifies \(checkpoint-4: ") as info:
        hf.latest_verified_checkpoint(out, verbose=False)
    assert "\n" not in str(info.value)


def test_a_first_run_still_starts_fresh(tmp_path):
    assert hf.latest_verified_checkpoint(tmp_path / "absent") is None
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "runs").mkdir()      # what else a Trainer's output_dir holds: no checkpoint
    assert hf.latest_verified_checkpoint(tmp_path / "empty") is None
    assert lightning.latest_verified_checkpoint(tmp_path / "absent") is None
    assert lightning.latest_verified_checkpoint(tmp_path / "empty") is None


def test_lightning_refuses_when_checkpoints_exist_and_none_verifies(tmp_path):
    ckpt = tmp_path / "ckpt"
    store = CheckpointStore(ckpt)
    tmp = store.begin(5, shared_name=True)
    (tmp / lightning.CKPT_FILE).write_bytes(b"a Lightning checkpoint")
    store.commit(tmp, 5, 0, format="lightning")
    assert lightning.latest_verified_checkpoint(ckpt).endswith(f"step-000000005/{lightning.CKPT_FILE}")
    (ckpt / "step-000000005" / lightning.CKPT_FILE).write_bytes(b"a Lightning checkpoint, cut")
    with pytest.raises(GuardError, match=r"^1 checkpoint\(s\) in .* none verifies \(.*step-000000005.*\): "
                                         r"refusing to start from step 0 .*allow_fresh=True"):
        lightning.latest_verified_checkpoint(ckpt)
    assert lightning.latest_verified_checkpoint(ckpt, allow_fresh=True) is None
