"""ResumableDataLoader with DataLoader workers: what users' loaders do besides augmenting.

The loader hands its workers a wrapper of the dataset (so that each batch's fetch is seeded from its place in the
epoch): a ``worker_init_fn`` that reaches the dataset through ``get_worker_info().dataset`` still finds its
methods. Loaders that cannot resume are refused when built, in one line: an IterableDataset (which, wrapped,
failed deep in a worker) and ``in_order=False`` (batches out of order: no consumed prefix to resume from).
"""

from __future__ import annotations

import pickle

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from gpuwise.guard import GuardError, ResumableDataLoader
from gpuwise.guard.sampler import _WorkerSeededDataset


class NeedsOpening(Dataset):
    """A dataset whose workers open their own handle (an LMDB or HDF5 file) in ``worker_init_fn``."""

    def __init__(self) -> None:
        self.handle: str | None = None

    def open(self) -> None:
        self.handle = "open"

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.handle != "open":
            raise RuntimeError("the worker's handle was never opened")
        return torch.tensor([float(index)])


def _open_in_worker(_worker_id: int) -> None:
    get_worker_info().dataset.open()


def test_a_worker_init_fn_reaches_the_users_dataset_through_the_worker_info():
    loader = ResumableDataLoader(NeedsOpening(), batch_size=4, shuffle=False, num_workers=2,
                                 worker_init_fn=_open_in_worker)
    samples = sorted(int(v) for batch in loader for v in batch.flatten().tolist())
    assert samples == list(range(12))


def test_the_worker_wrapper_survives_pickling_as_a_spawned_worker_gets_it():
    wrapper = pickle.loads(pickle.dumps(_WorkerSeededDataset(NeedsOpening())))
    wrapper.open()
    assert isinstance(wrapper.dataset, NeedsOpening) and wrapper.dataset.handle == "open"
    assert len(wrapper) == 12


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(8))

    def __len__(self) -> int:
        return 8


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_iterable_dataset_is_refused_when_the_loader_is_built(num_workers):
    with pytest.raises(GuardError, match="map-style dataset"):
        ResumableDataLoader(Stream(), batch_size=4, num_workers=num_workers)


def test_out_of_order_batches_are_refused_when_the_loader_is_built():
    with pytest.raises(GuardError, match="in_order=False"):
        ResumableDataLoader(NeedsOpening(), batch_size=4, num_workers=2, in_order=False)


def test_only_each_batchs_first_sample_is_hashed_for_its_seed():
    # the review: a sha256 per sample on the training process (~2.4 s an ImageNet epoch), of which each batch's
    # fetch reads only its first sample's
    from gpuwise.guard.sampler import ResumableSampler, _SeededSampler, sample_seed

    sampler = ResumableSampler(10, seed=3, shuffle=True)
    sampler.start = 2
    keyed = list(_SeededSampler(sampler, batch_size=4))
    assert [i for _, i in keyed] == list(sampler)
    seeds = [s for s, _ in keyed]
    assert seeds[1:4] == [0, 0, 0] and seeds[5:] == [0, 0, 0]
    assert seeds[0] == sample_seed(3, sampler.epoch, 2) and seeds[4] == sample_seed(3, sampler.epoch, 6)
