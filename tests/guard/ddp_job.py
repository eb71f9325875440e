"""A torchrun worker (gloo, CPU) for what only real ranks show:

1. an OOM on rank 1 only, after the forward drew dropout masks: every rank retries from the random state
   the step started with, so the run equals one that used the smaller micro-batch from the start (the same
   parameters, the same next random numbers on every rank);
2. a save that fails (ENOSPC injected on rank 0, the writer): the warning is printed once, not once per rank.

    torchrun --nproc-per-node 2 ddp_job.py WORK_DIR

Prints ``rank=R oom_retry_params_equal=B oom_retry_next_random_equal=B`` per rank.
"""

from __future__ import annotations

import errno
import random
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from gpuwise.guard import Guard, inject_oom_above
from gpuwise.guard import storage

BATCH, LIMIT, STEPS = 16, 4, 3


def _seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _train(directory: Path, rank: int, *, micro_batch_size: int | None = None,
           oom_on_rank: int | None = None) -> tuple[list[torch.Tensor], tuple[float, float, float]]:
    """STEPS steps of a DDP model with dropout on this rank's fixed batch; (parameters, next random numbers)."""
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.3), nn.Linear(32, 3)))
    g = torch.Generator().manual_seed(10 + rank)
    x, y = torch.randn(BATCH, 8, generator=g), torch.randint(0, 3, (BATCH,), generator=g)
    guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), micro_batch_size=micro_batch_size,
                  verbose=False)
    _seed_all(100 + rank)

    def loss_fn(b):
        return F.cross_entropy(model(b[0]), b[1])

    step_fn = inject_oom_above(loss_fn, LIMIT, after_loss=True) if oom_on_rank == rank else loss_fn
    for _ in range(STEPS):
        guard.step((x, y), step_fn)
    guard.close(save=False)
    return [p.detach().clone() for p in model.parameters()], (random.random(), float(np.random.rand()),
                                                             torch.rand(1).item())


def _fail_saves_on_writer(rank: int) -> None:
    if rank != 0:
        return

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    storage.HashingWriter.write = write


def main() -> int:
    work = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)

    split_params, split_next = _train(work / "split", rank, micro_batch_size=LIMIT)
    oom_params, oom_next = _train(work / "oom", rank, oom_on_rank=1)
    same = all(torch.equal(a, b) for a, b in zip(split_params, oom_params))
    print(f"rank={rank} oom_retry_params_equal={same} oom_retry_next_random_equal={split_next == oom_next}",
          flush=True)

    _fail_saves_on_writer(rank)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 3))
    guard = Guard(work / "full", model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=1,
                  max_save_failures=10, verbose=False)
    for _ in range(2):
        guard.step(torch.randn(4, 8), lambda b: model(b).pow(2).mean())
    guard.close(check=False)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
