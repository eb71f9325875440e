"""The save-time NaN/Inf check (``guard.state_nonfinite``) on states a real model has: a -inf mask buffer shared by
several layers is legitimate under every name state_dict gives it (was: refused under the second, so every save
failed), a float8 tensor (which torch.isfinite does not take) is checked widened (was: NotImplementedError out of
the save), a large tensor is checked a chunk at a time; a scheduler whose step() has no signature is not refused
(was: ValueError out of Guard())."""

from __future__ import annotations

import pytest
import torch

from gpuwise.guard import state_file
from gpuwise.guard.guard import check_scheduler, state_nonfinite


class SharedMask(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        mask = torch.full((4, 4), float("-inf")).triu(1)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))
        for layer in self.layers:
            layer.register_buffer("mask", mask)


def test_a_minus_inf_buffer_shared_by_two_layers_is_legitimate_under_both_names():
    model = SharedMask()
    assert [k for k in model.state_dict() if k.endswith("mask")] == ["layers.0.mask", "layers.1.mask"]
    assert state_nonfinite(model, {"model": model.state_dict(), "optimizer": None}) == []
    model.layers[1].mask[0, 0] = float("nan")      # NaN in the shared buffer is still found
    assert state_nonfinite(model, {"model": model.state_dict(), "optimizer": None}) == ["model.layers.0.mask",
                                                                                      "model.layers.1.mask"]


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_tensors_are_checked_widened(dtype):
    finite = torch.ones(8).to(dtype)
    nan = torch.tensor([1.0, float("nan")]).to(dtype)
    assert state_file.nonfinite_names({"model": {"w": finite, "v": nan}}) == ["model.v"]


def test_a_large_tensor_is_checked_a_chunk_at_a_time(monkeypatch):
    monkeypatch.setattr(state_file, "CHECK_CHUNK_ELEMENTS", 4)
    clean, bad = torch.zeros(10), torch.zeros(10)
    bad[9] = float("inf")                          # in the last, short chunk
    assert state_file.nonfinite_names({"model": {"a": clean, "b": bad}}) == ["model.b"]
    assert state_file.nonfinite_names({"model": {"b": bad}}, nan_only=["model.b"]) == []


def test_sparse_and_meta_tensors_are_not_checked():
    sparse = torch.tensor([[0.0, float("nan")]]).to_sparse()
    meta = torch.empty(3, device="meta")
    assert state_file.nonfinite_names({"model": {"s": sparse, "m": meta}}) == []


def test_a_scheduler_whose_step_has_no_signature_is_not_refused():
    class BuiltinStep:
        step = dict().clear                        # a C built-in: inspect.signature raises ValueError

    check_scheduler(BuiltinStep())
