"""A checkpoint of a partly frozen model (LoRA/QLoRA, a frozen backbone under a trained head) holds what training
changes: the trained parameters, the buffers and the optimizer state, with a fingerprint of the frozen parameters in
place of their values, which the script loads again on every start. Before, every checkpoint held the frozen base
too (an 8B LoRA: 16 GB a save where the adapters and their optimizer state are ~0.5 GB)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from gpuwise.guard import CheckpointStore, Guard, GuardError

WIDTH = 256            # the frozen backbone's width: its weights outweigh the trained part many times
RANK = 4               # the LoRA-like adapter's


class Tuned(nn.Module):
    """A pretrained backbone (``base_seed``: another seed is another base model), frozen; a LoRA-like adapter, a
    BatchNorm (trained affine, running statistics in buffers) and a head, trained."""

    def __init__(self, base_seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(base_seed)
        self.backbone = nn.Sequential(nn.Linear(8, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU())
        torch.manual_seed(1000)
        self.down = nn.Linear(WIDTH, RANK, bias=False)
        self.up = nn.Linear(RANK, WIDTH, bias=False)
        self.norm = nn.BatchNorm1d(WIDTH)
        self.head = nn.Linear(WIDTH, 3)
        self.backbone.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.backbone(x)
        return self.head(self.norm(h + self.up(self.down(h))))


def dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(48, 8, generator=g), torch.randint(0, 3, (48,), generator=g))


def make_guard(directory, model: nn.Module, **kw) -> Guard:
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.01)
    guard = Guard(directory, model, opt, verbose=False, **kw)
    guard.loader(dataset(), batch_size=8, seed=3)
    return guard


def train(guard: Guard, model: nn.Module, steps: int) -> list[float]:
    return [guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
            for batch in guard.batches(max_steps=steps)]


def saved_state(ckpt) -> dict:
    return torch.load(ckpt.path / "state.pt", weights_only=True)


def trained_and_buffer_names(model: nn.Module) -> set[str]:
    return ({n for n, p in model.named_parameters() if p.requires_grad} | {n for n, _ in model.named_buffers()})


def checkpoint_of(directory, model: nn.Module, steps: int = 2, **kw):
    guard = make_guard(directory, model, every_steps=steps, **kw)
    train(guard, model, steps)
    guard.close()
    return CheckpointStore(directory).latest()[0]


def test_a_partly_frozen_model_s_checkpoint_holds_its_trained_parameters_and_buffers_only(tmp_path):
    model = Tuned()
    ckpt = checkpoint_of(tmp_path / "lean", model)
    full = checkpoint_of(tmp_path / "full", Tuned(), save_frozen=True)
    state = saved_state(ckpt)
    assert set(state["model"]) == trained_and_buffer_names(model)
    assert set(state["frozen"]) == {n for n, p in model.named_parameters() if not p.requires_grad}
    assert ckpt.manifest.total_bytes < full.manifest.total_bytes / 4


def test_save_frozen_saves_the_whole_model_as_before(tmp_path):
    model = Tuned()
    state = saved_state(checkpoint_of(tmp_path / "ckpt", model, save_frozen=True))
    assert list(state["model"]) == list(model.state_dict()) and "frozen" not in state


def test_a_fully_trained_model_s_checkpoint_is_the_whole_state_dict_without_fingerprint(tmp_path):
    model = Tuned()
    model.backbone.requires_grad_(True)
    state = saved_state(checkpoint_of(tmp_path / "ckpt", model))
    assert list(state["model"]) == list(model.state_dict()) and "frozen" not in state


@pytest.mark.parametrize("async_save", [False, True])
def test_a_resume_trains_on_as_the_uninterrupted_run(tmp_path, async_save):
    straight = Tuned()
    straight_guard = make_guard(tmp_path / "straight", straight)
    straight_losses = train(straight_guard, straight, 6)
    straight_guard.close(save=False)

    first = Tuned()
    first_guard = make_guard(tmp_path / "ckpt", first, every_steps=3, async_save=async_save)
    train(first_guard, first, 3)
    first_guard.close()                 # waits for the save in flight
    first.head.weight.data.zero_()      # the live process is gone: nothing of it may reach the resumed run
    resumed = Tuned()                   # the script builds the model again: the pretrained base, a fresh head
    guard = make_guard(tmp_path / "ckpt", resumed)
    assert guard.resume() is not None and guard.step_count == 3
    losses = train(guard, resumed, 6)
    guard.close(save=False)
    assert losses == straight_losses[3:]
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_another_base_model_is_refused_in_one_line_naming_its_weights(tmp_path):
    checkpoint_of(tmp_path / "ckpt", Tuned(base_seed=0))
    guard = make_guard(tmp_path / "ckpt", Tuned(base_seed=1))
    with pytest.raises(GuardError) as refused:
        guard.resume()
    guard.close(save=False)
    message = str(refused.value)
    assert "\n" not in message and "backbone.0.weight" in message and "save_frozen=True" in message


def test_one_changed_frozen_weight_is_refused_naming_it(tmp_path):
    checkpoint_of(tmp_path / "ckpt", Tuned())
    changed = Tuned()
    changed.backbone[2].bias.data += 0.5
    guard = make_guard(tmp_path / "ckpt", changed)
    with pytest.raises(GuardError, match=r"1 differ .*\(backbone\.2\.bias \(other values\)\)") as refused:
        guard.resume()
    guard.close(save=False)
    assert "backbone.0" not in str(refused.value)


def guard_training(directory, model: nn.Module, names: set[str]) -> Guard:
    """A Guard whose optimizer trains the parameters ``names`` (those trained when the checkpoint was saved),
    whatever ``requires_grad`` says now, as a script that freezes or unfreezes a layer at some step builds it."""
    opt = torch.optim.AdamW([p for n, p in model.named_parameters() if n in names], lr=0.01)
    return Guard(directory, model, opt, verbose=False)


def test_a_parameter_frozen_when_saved_and_trained_now_resumes_where_its_values_match(tmp_path):
    """Before, refused whatever its values: but the checkpoint's training ran with the values the script loaded,
    so a model whose left-out entry matches its fingerprint resumes (it trains now: later saves hold it); one whose
    values differ is refused naming it."""
    saved = Tuned()
    trained_then = {n for n, p in saved.named_parameters() if p.requires_grad}
    checkpoint_of(tmp_path / "ckpt", saved)
    unfrozen = Tuned()
    unfrozen.backbone[2].weight.requires_grad_(True)
    guard = guard_training(tmp_path / "ckpt", unfrozen, trained_then)
    assert guard.resume() is not None and guard.step_count == 2
    guard.close(save=False)

    changed = Tuned()
    changed.backbone[2].weight.requires_grad_(True)
    changed.backbone[2].weight.data += 0.5
    guard = guard_training(tmp_path / "ckpt", changed, trained_then)
    with pytest.raises(GuardError, match=r"1 differ .*\(backbone\.2\.weight \(other values\)\)"):
        guard.resume()
    guard.close(save=False)


def test_a_parameter_trained_when_saved_and_frozen_now_is_loaded_from_the_checkpoint(tmp_path):
    """Before, refused although the checkpoint holds its value: a script that unfreezes a layer at some step
    freezes it again on every start, before resume(), so its saved (trained) values are loaded whatever
    requires_grad says now."""
    saved = Tuned()
    trained_then = {n for n, p in saved.named_parameters() if p.requires_grad}
    checkpoint_of(tmp_path / "ckpt", saved)
    frozen = Tuned()
    frozen.head.bias.requires_grad_(False)
    guard = guard_training(tmp_path / "ckpt", frozen, trained_then)
    assert guard.resume() is not None
    guard.close(save=False)
    assert torch.equal(frozen.head.bias, saved.head.bias) and not torch.equal(frozen.head.bias, Tuned().head.bias)


def test_a_whole_checkpoint_of_earlier_gpuwise_resumes_a_partly_frozen_model(tmp_path):
    """A checkpoint without a fingerprint (as every one was before) holds the whole model: it loads whole."""
    saved = Tuned()
    checkpoint_of(tmp_path / "ckpt", saved, save_frozen=True)
    resumed = Tuned(base_seed=1)
    guard = make_guard(tmp_path / "ckpt", resumed)
    assert guard.resume() is not None and guard.step_count == 2
    guard.close(save=False)
    for (name, a), b in zip(saved.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_a_frozen_parameter_holding_inf_does_not_stop_the_save(tmp_path):
    """The NaN/Inf check applies to what is saved: a frozen -inf mask kept as a parameter is not saved."""
    model = Tuned()
    model.mask = nn.Parameter(torch.full((3,), float("-inf")), requires_grad=False)
    ckpt = checkpoint_of(tmp_path / "ckpt", model)
    assert ckpt is not None and ckpt.step == 2 and "mask" in saved_state(ckpt)["frozen"]


class Quantized(nn.Module):
    """A frozen uint8-packed weight (as bitsandbytes' Params4bit holds nf4) with its quant state saved beside it
    under its name, a frozen embedding tied to the output layer, and a trained adapter."""

    def __init__(self, base_seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(base_seed)
        g = torch.Generator().manual_seed(base_seed)
        self.packed = nn.Parameter(torch.randint(0, 255, (64, 32), dtype=torch.uint8, generator=g),
                                   requires_grad=False)
        self.embed = nn.Embedding(16, 8)
        self.embed.weight.requires_grad_(False)
        self.out = nn.Linear(8, 16, bias=False)
        self.out.weight = self.embed.weight
        self.adapter = nn.Linear(8, 8)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "packed.absmax"] = self.packed.float().amax(dim=1)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        state_dict.pop(prefix + "packed.absmax", None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


def test_quantized_and_tied_frozen_weights_are_left_out_and_checked(tmp_path):
    model = Quantized()
    store = CheckpointStore(tmp_path / "ckpt")
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.adapter.parameters(), lr=0.1), verbose=False)
    guard.save()
    guard.close(save=False)
    state = saved_state(store.latest()[0])
    assert set(state["model"]) == {"adapter.weight", "adapter.bias"}
    assert set(state["frozen"]) == {"packed", "packed.absmax", "embed.weight", "out.weight"}
    assert state["frozen"]["packed"]["dtype"] == "torch.uint8"

    same = Guard(tmp_path / "ckpt", Quantized(), verbose=False)
    assert same.resume() is not None
    same.close(save=False)
    other = Guard(tmp_path / "ckpt", Quantized(base_seed=1), verbose=False)
    with pytest.raises(GuardError, match=r"packed \(other values\)"):
        other.resume()
    other.close(save=False)
