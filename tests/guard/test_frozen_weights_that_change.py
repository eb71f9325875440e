"""``requires_grad=False`` does not mean "never changes and the script rebuilds it": an EMA teacher (MoCo, BYOL,
DINO, mean teacher) is frozen and updated every step, a head trained then frozen holds trained values, a layer
unfrozen at some step is frozen again on every start. Before, a checkpoint left every frozen parameter out (its
fingerprint taken once a run): the teacher's and the head's values were lost (a resume refused, or restored the
teacher's initial values in silence) and a progressive unfreezing could not resume. A checkpoint now leaves out only
what was frozen all run and has not changed since the run started."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.data import TensorDataset

from gpuwise.guard import CheckpointStore, Guard, GuardError
from gpuwise.guard.frozen import SAMPLED_ELEMENTS, fingerprint

WIDTH = 64             # the frozen base's width


class Distilled(nn.Module):
    """A pretrained base (``base_seed``: another seed is another base model), frozen; an adapter, trained; a
    student, trained; an EMA teacher, a frozen copy of the student that ``ema`` moves towards it."""

    def __init__(self, base_seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(base_seed)
        self.base = nn.Linear(8, WIDTH)
        torch.manual_seed(1000)
        self.student = nn.Linear(WIDTH, 3)
        self.teacher = nn.Linear(WIDTH, 3)
        self.teacher.load_state_dict(self.student.state_dict())
        self.adapter = nn.Linear(WIDTH, 3)
        self.base.requires_grad_(False)
        self.teacher.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.base(x))
        return self.student(h) + self.adapter(h)

    @torch.no_grad()
    def ema(self, momentum: float = 0.5) -> None:
        for t, s in zip(self.teacher.parameters(), self.student.parameters()):
            t.mul_(momentum).add_(s, alpha=1 - momentum)


def dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g))


def start(directory, model: Distilled, **kw) -> Guard:
    """A Guard whose optimizer trains the adapter and the student, whatever the student's ``requires_grad`` (a
    script that freezes or unfreezes it at some step), saving every 4 steps."""
    trained = [*model.adapter.parameters(), *model.student.parameters()]
    guard = Guard(directory, model, torch.optim.SGD(trained, lr=0.5), every_steps=4, verbose=False, **kw)
    guard.loader(dataset(), batch_size=8, seed=1)
    return guard


def train(guard: Guard, model: Distilled, steps: int, after_step: Callable[[int], None] = lambda step: None) -> None:
    """Train up to step ``steps``, calling ``after_step(step)`` after each."""
    for batch in guard.batches(max_steps=steps):
        guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
        after_step(guard.step_count)


def latest_state(directory) -> dict:
    return torch.load(CheckpointStore(directory).latest()[0].path / "state.pt", weights_only=True)


def clone_of(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def equal(module: nn.Module, values: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(v, values[k]) for k, v in module.state_dict().items())


def resumed(directory, model: Distilled | None = None) -> Distilled:
    """A model the script builds again (pretrained base, initial student and teacher), resumed from ``directory``."""
    model = model or Distilled()
    guard = start(directory, model)
    assert guard.resume() is not None
    guard.close(save=False)
    return model


@pytest.mark.parametrize("ema_from_step", [1, 5])
def test_an_ema_teacher_resumes_with_its_exact_values(tmp_path, ema_from_step):
    """From step 1, or from step 5, after a first save that left the unchanged teacher out: its fingerprint then is
    not its fingerprint at step 8, and the teacher is not reset to its initial values in silence."""
    model = Distilled()
    guard = start(tmp_path, model)
    train(guard, model, 8, lambda step: model.ema() if step >= ema_from_step else None)
    guard.close()
    teacher_at_8 = clone_of(model.teacher)
    assert not equal(Distilled().teacher, teacher_at_8)

    again = resumed(tmp_path)
    assert equal(again.teacher, teacher_at_8)
    assert "teacher.weight" in latest_state(tmp_path)["model"]


def test_a_teacher_a_checkpoint_held_is_held_by_the_next_run_s_checkpoints_unchanged(tmp_path):
    """What a checkpoint carried stays carried: run 2 saves the teacher although it does not change in run 2."""
    model = Distilled()
    guard = start(tmp_path, model)
    train(guard, model, 4, lambda step: model.ema())
    guard.close()
    teacher_at_4 = clone_of(model.teacher)

    again = Distilled()
    guard = start(tmp_path, again)
    assert guard.resume() is not None
    train(guard, again, 8)          # no EMA in this run
    guard.close()
    assert {"teacher.weight", "teacher.bias"} <= set(latest_state(tmp_path)["model"])
    assert equal(resumed(tmp_path).teacher, teacher_at_4)


def test_a_head_trained_then_frozen_resumes_with_its_trained_values(tmp_path):
    model = Distilled()
    guard = start(tmp_path, model)
    train(guard, model, 8, lambda step: model.student.requires_grad_(False) if step == 4 else None)
    guard.close()
    student_at_8 = clone_of(model.student)
    assert "student.weight" in latest_state(tmp_path)["model"]

    rebuilt = Distilled()           # the script freezes the head at step 4, after resume(): it trains at start
    assert equal(resumed(tmp_path, rebuilt).student, student_at_8)


def test_a_layer_unfrozen_at_step_4_resumes_frozen_at_start_with_its_saved_values(tmp_path):
    model = Distilled()
    model.student.requires_grad_(False)      # the start config: unfrozen at step 4
    guard = start(tmp_path, model)
    train(guard, model, 8, lambda step: model.student.requires_grad_(True) if step == 4 else None)
    guard.close()
    student_at_8 = clone_of(model.student)
    assert not equal(Distilled().student, student_at_8)

    rebuilt = Distilled()
    rebuilt.student.requires_grad_(False)    # frozen again at start, before resume()
    assert equal(resumed(tmp_path, rebuilt).student, student_at_8)


def test_a_base_that_never_changes_is_left_out_across_a_resume_and_a_second_run_s_saves(tmp_path):
    model = Distilled()
    guard = start(tmp_path, model)
    train(guard, model, 4)
    guard.close()
    again = Distilled()
    guard = start(tmp_path, again)
    assert guard.resume() is not None
    train(guard, again, 12)
    guard.close()
    state = latest_state(tmp_path)
    assert CheckpointStore(tmp_path).latest()[0].step == 12
    assert set(state["model"]) == {"student.weight", "student.bias", "adapter.weight", "adapter.bias"}
    assert set(state["frozen"]) == {"base.weight", "base.bias", "teacher.weight", "teacher.bias"}


def test_another_base_is_still_refused_naming_it(tmp_path):
    model = Distilled()
    guard = start(tmp_path, model)
    train(guard, model, 4)
    guard.close()
    guard = start(tmp_path, Distilled(base_seed=1))
    with pytest.raises(GuardError, match=r"base\.weight \(other values\)") as refused:
        guard.resume()
    guard.close(save=False)
    assert "\n" not in str(refused.value) and "teacher" not in str(refused.value)


def test_a_left_out_weight_on_the_meta_device_is_not_a_difference(tmp_path):
    """Its values are unknown (a model materialized later): unknown is not "different"."""
    model = Distilled()
    guard = start(tmp_path, model)
    train(guard, model, 4)
    guard.close()
    on_meta = Distilled()
    on_meta.base.weight = nn.Parameter(torch.empty(WIDTH, 8, device="meta"), requires_grad=False)
    guard = start(tmp_path, on_meta)
    assert guard.resume() is not None
    guard.close(save=False)
    assert torch.equal(on_meta.student.weight, model.student.weight)


class LargestAllocation(TorchDispatchMode):
    """Records the most bytes of new storage (not a view of an input's) any operator's output holds."""

    def __init__(self) -> None:
        super().__init__()
        self.nbytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.nbytes = max(self.nbytes, t.untyped_storage().nbytes())
        return out


def test_a_non_contiguous_tensor_is_fingerprinted_as_its_contiguous_copy_without_copying_it_whole():
    whole = torch.randn(512, 384)
    transposed = whole.t()
    largest = LargestAllocation()
    with largest:
        printed = fingerprint({"w": transposed})
    assert printed == fingerprint({"w": transposed.contiguous()})
    assert largest.nbytes <= 16 * SAMPLED_ELEMENTS   # the sample and its positions, not the tensor's 786432 bytes
