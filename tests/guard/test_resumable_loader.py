"""The data loader resumes at the next unseen sample: nothing skipped, nothing repeated."""

from __future__ import annotations

import torch

from gpuwise.guard import ResumableDataLoader

from .helpers import indexed_dataset


def _ids(batch) -> list[int]:
    return batch[2].tolist()


def test_resume_mid_epoch_continues_with_exactly_the_unseen_samples():
    data = indexed_dataset(50)
    full = ResumableDataLoader(data, batch_size=8, seed=3)
    reference = [_ids(b) for _ in range(2) for b in full]          # two whole epochs, uninterrupted

    first = ResumableDataLoader(data, batch_size=8, seed=3)
    it = iter(first)
    seen = [_ids(next(it)) for _ in range(4)]
    state = first.state_dict()                                      # killed after 4 batches
    resumed = ResumableDataLoader(data, batch_size=8, seed=3)
    resumed.load_state_dict(state)
    seen += [_ids(b) for b in resumed] + [_ids(b) for b in resumed]  # rest of epoch 0, then epoch 1
    assert seen == reference
    assert sorted(i for b in reference[:7] for i in b) == list(range(50))


def test_epochs_are_reshuffled_by_seed_and_epoch():
    data = indexed_dataset(32)
    loader = ResumableDataLoader(data, batch_size=32, seed=0)
    e0, e1 = (_ids(b) for _ in range(2) for b in loader)
    assert sorted(e0) == sorted(e1) == list(range(32)) and e0 != e1
    again = ResumableDataLoader(data, batch_size=32, seed=0)
    assert _ids(next(iter(again))) == e0


def test_ranks_get_disjoint_shards_that_cover_the_epoch():
    data = indexed_dataset(40)
    shards = [[i for b in ResumableDataLoader(data, batch_size=4, seed=1, rank=r, world_size=2) for i in _ids(b)]
              for r in range(2)]
    assert not set(shards[0]) & set(shards[1]) and sorted(shards[0] + shards[1]) == list(range(40))


def test_resume_with_another_world_size_keeps_the_consumed_prefix():
    data = indexed_dataset(48)
    two = [ResumableDataLoader(data, batch_size=4, seed=5, rank=r, world_size=2) for r in range(2)]
    done = []
    for loader in two:
        it = iter(loader)
        done += [i for _ in range(3) for i in _ids(next(it))]       # 3 steps x 4 samples x 2 ranks
    one = ResumableDataLoader(data, batch_size=4, seed=5)
    one.load_state_dict(two[0].state_dict())
    rest = [i for b in one for i in _ids(b)]
    assert sorted(done + rest) == list(range(48))


def test_state_excluding_the_last_batch_replays_it():
    data = indexed_dataset(16)
    loader = ResumableDataLoader(data, batch_size=4, seed=0)
    it = iter(loader)
    next(it)
    crashed_on = _ids(next(it))
    again = ResumableDataLoader(data, batch_size=4, seed=0)
    again.load_state_dict(loader.state_dict(exclude_last_batch=True))
    assert _ids(next(iter(again))) == crashed_on


def test_iterating_does_not_touch_the_global_torch_rng():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    loader = ResumableDataLoader(indexed_dataset(16), batch_size=4, seed=0)
    for _ in loader:
        pass
    assert torch.equal(torch.rand(3), expected)


def test_a_loop_that_stops_after_len_batches_gets_the_next_epoch_not_an_empty_one():
    # Lightning draws len(loader) batches and never asks for one more: the epoch's iteration was not run to its
    # end, and the next one was empty (epoch 1 trained on nothing, len() said 0)
    data = indexed_dataset(12)
    whole = ResumableDataLoader(data, batch_size=4, seed=1)
    reference = [_ids(b) for _ in range(2) for b in whole]
    loader = ResumableDataLoader(data, batch_size=4, seed=1)
    seen = []
    for _ in range(2):
        assert len(loader) == 3
        it = iter(loader)
        seen += [_ids(next(it)) for _ in range(len(loader))]
    assert seen == reference and loader.epoch == 1
    state = loader.state_dict()          # saved there, resumed: the run goes on with epoch 2
    resumed = ResumableDataLoader(data, batch_size=4, seed=1)
    resumed.load_state_dict(state)
    assert len(resumed) == 3 and [_ids(b) for b in resumed] == [_ids(b) for b in _epoch(data, seed=1, epoch=2)]


def _epoch(data, *, seed: int, epoch: int) -> list:
    loader = ResumableDataLoader(data, batch_size=4, seed=seed)
    loader.load_state_dict({"epoch": epoch, "consumed": 0, "seed": seed, "world_size": 1})
    return list(loader)


def test_under_a_real_lightning_trainer_every_epoch_trains_on_its_batches(tmp_path):
    import lightning as L

    data = indexed_dataset(12)
    trained: list[tuple[int, list[int]]] = []

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(1, 1)

        def training_step(self, batch, batch_idx):
            trained.append((self.current_epoch, _ids(batch)))
            return self.net(batch[2].float().unsqueeze(-1)).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(Module(), ResumableDataLoader(data, batch_size=4, seed=1))
    whole = ResumableDataLoader(data, batch_size=4, seed=1)
    reference = [_ids(b) for _ in range(2) for b in whole]
    assert [epoch for epoch, _ in trained] == [0, 0, 0, 1, 1, 1]
    assert [ids for _, ids in trained] == reference


def test_a_position_at_an_epochs_end_is_the_next_epochs_start():
    # was: saved as (epoch 1, all consumed) while iteration rolled over only when asked for more: a Guard
    # resumed at the last step of its last epoch saw epoch 1 < max_epochs 2 and trained a whole third epoch
    data = indexed_dataset(8)
    loader = ResumableDataLoader(data, batch_size=2, seed=1)
    for _ in range(2):
        it = iter(loader)
        for _ in range(len(loader)):
            next(it)
    assert loader.state_dict()["epoch"] == 2 and loader.state_dict()["consumed"] == 0
    assert loader.state_dict(exclude_last_batch=True) == {"epoch": 1, "consumed": 6, "seed": 1, "world_size": 1}
    old = ResumableDataLoader(data, batch_size=2, seed=1)   # a state written as "all of epoch 1 handed out"
    old.load_state_dict({"epoch": 1, "consumed": 8, "seed": 1, "world_size": 1})
    assert old.epoch == 2 and len(old) == 4


def test_a_guard_resumed_at_the_last_step_of_its_last_epoch_trains_no_more(tmp_path):
    from gpuwise.guard import Guard

    def run(preempt_at=None):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        guard = Guard(tmp_path / "ck", model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=100,
                      verbose=False, exit_on_preempt=False)
        guard.loader(indexed_dataset(8), batch_size=2, seed=1)
        guard.resume()
        steps = 0
        for batch in guard.batches(max_epochs=2):
            guard.step(batch, lambda b: model(b[0]).pow(2).mean())
            steps += 1
            if guard.step_count == preempt_at:
                guard.preemption.request()
        guard.close()
        return steps, guard.step_count

    assert run(preempt_at=8) == (8, 8)      # the last step of epoch 1, saved on preemption
    assert run() == (0, 8)                  # was (4, 12): a third epoch
