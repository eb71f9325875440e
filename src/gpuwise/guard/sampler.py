"""A data loader that can be stopped anywhere and resumed at the next unseen sample.

The order of samples is a pure function of (seed, epoch, rank, world size): a resumed run rebuilds the
same permutation and skips the samples that completed steps already consumed. Nothing is skipped or
repeated, however often the job is killed. With worker processes, the random numbers a batch's fetch draws
(augmentation) are a pure function of (seed, epoch, the batch's place in the epoch) too.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler

from gpuwise.guard.errors import GuardError
from gpuwise.guard.rng import seed_all

log = logging.getLogger(__name__)

# DataLoader arguments the loader sets itself, and what to pass instead.
_RESERVED_ARGUMENTS = {
    "sampler": "pass seed= and shuffle= (for weighted sampling, a torch.utils.data.Subset of indices drawn once "
               "from the weights)",
    "batch_sampler": "pass batch_size=, drop_last=, seed= and shuffle=",
    "generator": "pass seed=: the loader seeds its own generator from it, per epoch",
}


class ResumableSampler(Sampler[int]):
    """Shuffles per epoch by ``seed + epoch`` (like DistributedSampler) and can start mid-epoch.

    With ``world_size > 1`` every rank gets a disjoint shard; the permutation is padded (by repeating its
    head) to a multiple of the world size so that all ranks run the same number of steps, as
    DistributedSampler does; ``drop_last`` instead drops the tail.
    """

    def __init__(self, data_len: int, *, seed: int = 0, shuffle: bool = True, rank: int = 0,
                 world_size: int = 1, drop_last: bool = False) -> None:
        if data_len <= 0:
            raise GuardError(f"the dataset is empty (len {data_len}): the resumable loader needs at least one sample; "
                             "check the dataset's path or filter")
        self.data_len = data_len
        self.seed = seed
        self.shuffle = shuffle
        self.rank = rank
        self.world_size = world_size
        self.drop_last = drop_last
        self.epoch = 0
        self.start = 0  # samples of this rank's shard to skip at the next iteration

    @property
    def shard_len(self) -> int:
        return samples_per_rank(self.data_len, self.world_size, self.drop_last)

    def shard_indices(self) -> list[int]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.data_len, generator=g).tolist()
        else:
            order = list(range(self.data_len))
        total = self.shard_len * self.world_size
        if total > len(order):
            order += order[: total - len(order)]
        return order[:total][self.rank :: self.world_size]

    def __iter__(self) -> Iterator[int]:
        if self.shard_len == 0:   # a loop of the user's own would train this rank on nothing, epoch after epoch
            raise GuardError(empty_shard_message(self.data_len, self.world_size))
        return iter(self.shard_indices()[self.start :])

    def __len__(self) -> int:
        return self.shard_len - self.start


def samples_per_rank(data_len: int, world_size: int, drop_last: bool) -> int:
    """Samples of each rank's shard of an epoch: the order padded to a multiple of ``world_size``, or with
    ``drop_last`` its tail dropped (0 when there are fewer samples than ranks)."""
    return data_len // world_size if drop_last else math.ceil(data_len / world_size)


def position_in_world(consumed: int, saved_world_size: int, world_size: int, data_len: int,
                      drop_last: bool) -> int:
    """Samples of a rank's shard done in a world of ``world_size``, for ``consumed`` samples of each rank's shard
    done in a world of ``saved_world_size``: rank r's i-th sample is the (i*world + r)-th of the epoch's global
    order, so the first ``consumed * saved_world_size`` of that order are done. An epoch all handed out in the
    saved world (``consumed`` = the shard's length: what older gpuwise saved at an epoch's last step) is all
    handed out in the new one too, not its tail trained again."""
    if consumed >= samples_per_rank(data_len, saved_world_size, drop_last):
        return samples_per_rank(data_len, world_size, drop_last)
    return consumed * saved_world_size // world_size


_EMPTY_SHARD_WHY = ("drop_last leaves each rank 0 samples (fewer samples than ranks); use more samples, fewer ranks "
                    "or drop_last=False")


def empty_shard_message(data_len: int, world_size: int) -> str:
    """The one line that refuses iterating a :class:`ResumableSampler` whose shard is empty."""
    return (f"the resumable sampler has no sample for this rank ({data_len} samples, {world_size} ranks, "
            f"drop_last=True): {_EMPTY_SHARD_WHY}")


def no_batch_message(data_len: int, world_size: int, batch_size: int, drop_last: bool) -> str:
    """The one line that refuses an epoch of the resumable loader that yielded no batch (a loop over it would go on
    through empty epochs forever)."""
    per_rank = samples_per_rank(data_len, world_size, drop_last)
    setup = f"{data_len} samples, {world_size} ranks, batch size {batch_size}, drop_last={drop_last}"
    if per_rank == 0:
        why = _EMPTY_SHARD_WHY
    else:
        why = f"each rank's {per_rank} samples should make a batch, but the loader handed out none"
    return f"an epoch of the resumable loader yielded no batch ({setup}): {why}"


def sample_seed(seed: int, epoch: int, position: int) -> int:
    """The seed of the sample at ``position`` of epoch ``epoch``'s global order (rank r's i-th sample is at
    ``i * world_size + r``): the same in every run, on every resume, and another one for every sample."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{epoch}/{position}".encode()).digest()[:8], "little")


class _SeededSampler(Sampler[tuple[int, int]]):
    """A :class:`ResumableSampler`'s indices as ``(seed, index)``: the first sample of each batch of
    ``batch_size`` carries its ``sample_seed`` (what the worker seeds the batch's fetch with), the others 0 (a
    hash per sample would cost seconds an ImageNet epoch on the training process)."""

    def __init__(self, sampler: ResumableSampler, batch_size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size

    def __iter__(self) -> Iterator[tuple[int, int]]:
        s = self.sampler
        for i, index in enumerate(s):
            offset = s.start + i
            yield (sample_seed(s.seed, s.epoch, offset * s.world_size + s.rank) if i % self.batch_size == 0
                   else 0), index

    def __len__(self) -> int:
        return len(self.sampler)


class _WorkerSeededDataset(Dataset):
    """Fetches a batch of ``(seed, index)`` in a DataLoader worker after seeding every generator from its first
    sample's seed.

    A worker seeds its generators once, when an iterator starts it, and batches go to the workers in turn: a
    resumed iterator handed the same samples other random augmentations than the uninterrupted run drew, and
    every rank's workers drew the same stream. Only for ``num_workers > 0``: in the main process the
    generators are the training's own, which checkpoints save and restore.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:
        """The user's dataset's attributes, read through the wrapper: a ``worker_init_fn`` that calls
        ``get_worker_info().dataset.open()`` reaches the dataset it opened before. (Not ``dataset`` itself:
        unpickled in a spawned worker, the wrapper has none yet.)"""
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __getitems__(self, keyed: list[tuple[int, int]]) -> list[Any]:
        seed_all(keyed[0][0])
        indices = [index for _, index in keyed]
        fetch = getattr(self.dataset, "__getitems__", None)
        return fetch(indices) if fetch else [self.dataset[index] for index in indices]


class ResumableDataLoader:
    """A ``torch.utils.data.DataLoader`` over a :class:`ResumableSampler` that counts what it handed out.

    Iterating yields the rest of the current epoch; when an epoch is exhausted the epoch counter advances.
    ``state_dict()`` is the position after the last batch handed out (the guard saves it after the step that
    consumed that batch completed).
    """

    def __init__(self, dataset: Dataset, batch_size: int, *, seed: int = 0, shuffle: bool = True,
                 rank: int = 0, world_size: int = 1, drop_last: bool = False, **loader_kwargs: Any) -> None:
        for reserved, instead in _RESERVED_ARGUMENTS.items():
            if reserved in loader_kwargs:
                raise GuardError(f"{reserved}= is not taken by the resumable loader: it orders samples itself, by "
                                 "(seed, epoch, rank, world size), so that a resume continues mid-epoch, which a "
                                 f"{reserved} of your own would not; {instead}")
        if isinstance(dataset, IterableDataset):
            raise GuardError(f"{type(dataset).__name__} is an IterableDataset: the guard cannot resume mid-stream (it "
                             "has no sample order to skip into); use a map-style dataset (len and indexing), or "
                             "checkpoint the stream's position yourself in extra_state= and iterate it without "
                             "guard.loader")
        if not loader_kwargs.get("in_order", True):
            raise GuardError("in_order=False is not taken by the resumable loader: batches handed out of order leave "
                             "no consumed prefix to resume from (samples would be skipped and repeated); leave "
                             "in_order at True")
        self.dataset = dataset
        self.batch_size = batch_size
        self.seed = seed  # of every epoch this loader starts (the sampler's is the current epoch's: see load_state_dict)
        self.sampler = ResumableSampler(len(dataset), seed=seed, shuffle=shuffle, rank=rank,
                                        world_size=world_size, drop_last=drop_last)
        self._loader_kwargs = loader_kwargs
        self.consumed = 0          # samples of this rank's shard handed out in the current epoch
        self.last_batch_samples = 0

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def __len__(self) -> int:
        """Batches the next iteration yields: the rest of the current epoch, or a whole next one."""
        left = self.sampler.shard_len - self.consumed
        return math.ceil((left if left > 0 else self.sampler.shard_len) / self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        if self.sampler.shard_len == 0:   # refused here too, in the words that name the batch size
            raise GuardError(self.no_batch_message())
        if self.consumed >= self.sampler.shard_len:
            # every sample of the epoch was handed out, but the iteration that did it was not run to its end
            # (a loop that stops after len() batches, as Lightning's does): the next epoch, not an empty one
            self._next_epoch()
        self.sampler.start = self.consumed
        # Our own generator: DataLoader draws its workers' base seed from the *global* torch RNG when an
        # iterator is created, so a mid-epoch resume would shift every later random number (dropout...).
        generator = torch.Generator().manual_seed(self.sampler.seed * 1_000_003 + self.epoch)
        if self._loader_kwargs.get("num_workers", 0) > 0:
            dataset, sampler = _WorkerSeededDataset(self.dataset), _SeededSampler(self.sampler, self.batch_size)
        else:
            dataset, sampler = self.dataset, self.sampler
        loader = DataLoader(dataset, batch_size=self.batch_size, sampler=sampler, generator=generator,
                            **self._loader_kwargs)
        for batch in loader:
            self.last_batch_samples = min(self.batch_size, self.sampler.shard_len - self.consumed)
            self.consumed += self.last_batch_samples
            yield batch
        self._next_epoch()

    def no_batch_message(self) -> str:
        """Why an epoch of this loader yielded no batch (:func:`no_batch_message`)."""
        return no_batch_message(self.sampler.data_len, self.sampler.world_size, self.batch_size,
                                self.sampler.drop_last)

    def _next_epoch(self) -> None:
        self.sampler.epoch += 1
        self.sampler.seed = self.seed
        self.consumed = 0
        self.last_batch_samples = 0

    def state_dict(self, *, exclude_last_batch: bool = False) -> dict[str, int]:
        """Position; ``exclude_last_batch`` for a crash inside the step that drew the last batch."""
        consumed = self.consumed - (self.last_batch_samples if exclude_last_batch else 0)
        epoch = self.epoch
        seed = self.sampler.seed
        if consumed >= self.sampler.shard_len:   # the epoch was all handed out: the position is the next one's start
            epoch, consumed = epoch + 1, 0       # (a checkpoint at an epoch's last step resumes past that epoch)
            seed = self.seed
        return {"epoch": epoch, "consumed": consumed, "seed": seed, "world_size": self.sampler.world_size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue at the saved position. An epoch begun with another seed than this loader's ends in that seed's
        order (a new order mid-epoch would skip some samples and repeat others), as the uninterrupted run does;
        this loader's seed applies from the next epoch, said in one warning (rank 0)."""
        self.sampler.epoch = int(state["epoch"])
        saved_consumed = consumed = int(state["consumed"])
        old_world = int(state.get("world_size", self.sampler.world_size))
        if old_world != self.sampler.world_size:   # an elastic restart with another world size
            consumed = position_in_world(consumed, old_world, self.sampler.world_size, self.sampler.data_len,
                                         self.sampler.drop_last)
        self.consumed = min(consumed, self.sampler.shard_len)
        self.last_batch_samples = 0
        saved_seed = int(state.get("seed", self.seed))
        # Begun is judged on the saved position: converted to more ranks it can round down to 0, and the epoch's
        # first samples, trained already, must still end it in the saved seed's order.
        mid_epoch = saved_consumed > 0 and self.consumed < self.sampler.shard_len
        self.sampler.seed = saved_seed if mid_epoch else self.seed
        if saved_seed != self.seed and self.sampler.rank == 0:
            log.warning("%s", seed_change_message(saved_seed, self.seed, self.sampler.epoch, mid_epoch))
        if self.consumed >= self.sampler.shard_len:   # a state saved as "all of epoch e handed out"
            self._next_epoch()


def seed_change_message(saved_seed: int, seed: int, epoch: int, mid_epoch: bool) -> str:
    """The one line a resume says when the loader's ``seed`` is not the checkpoint's ``saved_seed``."""
    if mid_epoch:
        return (f"the checkpoint's epoch {epoch} was ordered by seed={saved_seed}, this loader has seed={seed}: epoch "
                f"{epoch} ends in seed={saved_seed}'s order (no sample skipped or repeated), seed={seed} applies from "
                f"epoch {epoch + 1}")
    return f"the checkpoint was ordered by seed={saved_seed}, this loader has seed={seed}: it applies from this epoch on"
