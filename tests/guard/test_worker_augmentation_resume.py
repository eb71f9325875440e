"""Random augmentation in DataLoader workers resumes as the uninterrupted run drew it.

Workers seed their generators once, when an iterator starts them, and batches go to workers round-robin: a
mid-epoch resume restarted every worker's stream at another batch, so the same samples came back with other
crops, flips and noise than the uninterrupted run's (the main process's generators, which checkpoints save,
never reach the workers).
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from gpuwise.guard import Guard, ResumableDataLoader


class NoisyDataset(Dataset):
    """Sample i is i plus noise below 0.75 from torch's, Python's and NumPy's generators: a random augmentation."""

    def __len__(self) -> int:
        return 24

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index)]) + (torch.rand(1) + random.random() + float(np.random.rand())) / 4


def _rows(batch: torch.Tensor) -> list[float]:
    return batch.flatten().tolist()


def test_worker_augmentation_after_a_mid_epoch_resume_matches_the_uninterrupted_run():
    reference = ResumableDataLoader(NoisyDataset(), batch_size=4, seed=7, num_workers=2)
    uninterrupted = [_rows(b) for _ in range(2) for b in reference]      # two epochs of 6 batches

    first = ResumableDataLoader(NoisyDataset(), batch_size=4, seed=7, num_workers=2)
    it = iter(first)
    resumed = [_rows(next(it)) for _ in range(3)]                      # killed after 3 batches
    state = first.state_dict()
    del it
    second = ResumableDataLoader(NoisyDataset(), batch_size=4, seed=7, num_workers=2)
    second.load_state_dict(state)
    resumed += [_rows(b) for _ in range(2) for b in second]            # rest of epoch 0, then epoch 1
    assert resumed == uninterrupted


def test_worker_augmentation_stays_random_across_samples_ranks_and_epochs():
    ranks = [ResumableDataLoader(NoisyDataset(), batch_size=4, seed=7, num_workers=2, rank=r, world_size=2)
             for r in range(2)]
    noise: dict[tuple[int, int], float] = {}                           # (epoch, sample) -> its augmentation
    for loader in ranks:
        for epoch in range(2):
            for value in (v for b in loader for v in _rows(b)):
                noise[epoch, int(value)] = value - int(value)
    assert len(noise) == 48                                            # every sample once per epoch
    assert len({round(v, 6) for v in noise.values()}) > 40             # not one draw repeated
    assert any(round(noise[0, i], 6) != round(noise[1, i], 6) for i in range(24))


def _train(directory, steps: int) -> list[list[float]]:
    torch.manual_seed(0)
    model = nn.Linear(1, 1)
    guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.01), every_steps=1, verbose=False)
    guard.loader(NoisyDataset(), batch_size=4, seed=3, num_workers=2)
    guard.resume()
    seen = []
    for batch in guard.batches(max_steps=steps):
        guard.step(batch, lambda b: model(b).pow(2).mean())
        seen.append(_rows(batch))
    guard.close()
    return seen


def test_guard_resume_with_workers_trains_on_the_uninterrupted_runs_augmented_batches(tmp_path):
    uninterrupted = _train(tmp_path / "a", 9)
    resumed = _train(tmp_path / "b", 4) + _train(tmp_path / "b", 9)     # stopped mid-epoch at step 4
    assert resumed == uninterrupted
