"""A guarded job whose restart has more ranks than its checkpoint (the world size grew): a model with dropout
trains 3 steps in one process, then 2 gloo ranks resume it.

    python grown_world_job.py CKPT_DIR 1                      # trains and saves step 3
    python grown_world_job.py CKPT_DIR 2 RANK INIT_FILE       # one of 2 ranks resuming it

A resuming rank prints ``rank=R draws=[...]``: the first numbers its generators give after the resume.
"""

from __future__ import annotations

import datetime
import json
import random
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from gpuwise.guard import Guard


def main() -> int:
    ckpt, world = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 3))
    if world == 1:
        guard = Guard(ckpt, model, torch.optim.SGD(model.parameters(), lr=0.1))
        for _ in range(3):
            guard.step((torch.randn(4, 8), torch.randint(0, 3, (4,))), lambda b: F.cross_entropy(model(b[0]), b[1]))
        guard.close()
        return 0
    rank, init_file = int(sys.argv[3]), sys.argv[4]
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    model = nn.parallel.DistributedDataParallel(model)
    guard = Guard(ckpt, model, torch.optim.SGD(model.parameters(), lr=0.1))
    guard.resume()
    draws = [torch.rand(2).tolist(), float(np.random.rand()), random.random()]
    print(f"rank={rank} draws={json.dumps(draws)}", flush=True)
    guard.close(save=False)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
