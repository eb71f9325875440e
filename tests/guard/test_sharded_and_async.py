"""torch.distributed.checkpoint (the FSDP path) and asynchronous saves produce checkpoints that resume
to the same state as synchronous torch.save ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpuwise.guard import AsyncSaver, CheckpointStore, Guard, GuardError

from .helpers import indexed_dataset, tiny_model


def _train(tmp_path, name: str, steps: int, **guard_kw) -> Guard:
    model = tiny_model(seed=1, dropout=0.2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    guard = Guard(tmp_path / name, model, opt, scheduler=sched, every_steps=2, verbose=False, **guard_kw)
    guard.loader(indexed_dataset(40), batch_size=8, seed=2)
    guard.resume()
    for batch in guard.batches(max_steps=steps):
        guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
    guard.close()
    return guard


def _params(guard: Guard) -> list[torch.Tensor]:
    return [p.detach().clone() for p in guard.model.parameters()]


@pytest.mark.parametrize("variant", [{"sharded": True}, {"async_save": True}])
def test_stop_and_resume_equals_uninterrupted(tmp_path, variant):
    straight = _params(_train(tmp_path, "straight", 7))
    _train(tmp_path, "resumed", 4, **variant)          # stops after the checkpoint of step 4
    torch.manual_seed(123)                             # a restarted process has other RNG state ...
    resumed = _train(tmp_path, "resumed", 7, **variant)  # ... which resume restores
    after = _params(resumed)
    assert straight and len(after) == len(straight)
    for a, b in zip(straight, after):
        assert torch.equal(a, b)
    manifest = CheckpointStore(tmp_path / "resumed").latest()[0].manifest
    if variant.get("sharded"):
        assert manifest.format == "torch.distributed.checkpoint" and "extra.pt" in manifest.files
        assert any(name.endswith(".distcp") for name in manifest.files)


def test_async_saver_reports_a_background_error_on_the_next_call():
    saver = AsyncSaver()

    def fail():
        raise GuardError("disk gone")

    saver.submit(fail)
    with pytest.raises(GuardError, match="disk gone"):
        saver.submit(lambda: None)   # the next save request surfaces the previous failure
    saver.wait()
    saver.submit(lambda: 42)
    assert saver.wait() == 42


def test_async_snapshot_is_isolated_from_later_training_steps(tmp_path):
    model = tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    guard = Guard(tmp_path / "ckpt", model, opt, async_save=True, verbose=False)
    before = [p.detach().clone() for p in model.parameters()]
    guard.save("manual")
    x = torch.randn(4, 8)
    guard.step(x, lambda b: model(b).pow(2).mean())   # changes the parameters while the save may still run
    guard.close()  # also saves step 1 (the last step, unsaved)
    store = CheckpointStore(tmp_path / "ckpt")
    state = store.load_state(store.verify(tmp_path / "ckpt" / "step-000000000"))
    for p, name in zip(before, state["model"]):
        assert torch.equal(p, state["model"][name])
