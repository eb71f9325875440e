"""A small, real training job kept alive by gpuwise.guard: kill it at any moment, start it again, and it
finishes with exactly the parameters an uninterrupted run has (deterministic on CPU).

    python examples/train_guarded.py --checkpoint-dir /tmp/ckpt --steps 200 --seed 0
    torchrun --nproc-per-node 2 --max-restarts 3 examples/train_guarded.py --checkpoint-dir /shared/ckpt ...

The last line of a completed run is ``final_checksum=<sha256 of the model's parameters and buffers>``.
Exit code 75 after SIGTERM means "checkpointed, restart me"; exit code 2 with one line on stderr means
the guard refused (no checkpoint verifies and --fresh was not given, or saves kept failing).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from gpuwise.guard import Guard, GuardError, inject_oom_above
from gpuwise.guard.distributed import unwrap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--steps", type=int, required=True, help="optimizer steps in total (across restarts)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--save-every", type=int, default=10, help="checkpoint every K steps")
    p.add_argument("--every-minutes", type=float, default=None, help="also checkpoint every M minutes")
    p.add_argument("--keep", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--micro-batch-size", type=int, default=None)
    p.add_argument("--hidden", type=int, default=256, help="width of the MLP (checkpoint size)")
    p.add_argument("--samples", type=int, default=640, help="dataset size")
    p.add_argument("--async-save", action="store_true")
    p.add_argument("--run-log", default=None, help="SQLite run log for gpuwise advise/report")
    p.add_argument("--grace-s", type=float, default=20.0)
    p.add_argument("--fresh", action="store_true",
                   help="start from step 0 even though checkpoints exist and none verifies")
    p.add_argument("--max-save-failures", type=int, default=3, help="saves failing in a row that end the run")
    p.add_argument("--inject-oom-above", type=int, default=None,
                   help="test hook: micro-batches larger than this raise torch.cuda.OutOfMemoryError")
    p.add_argument("--inject-oom-rank", type=int, default=None, help="inject only on this rank (default: all)")
    p.add_argument("--step-sleep-s", type=float, default=0.0, help="slow each step down (signal tests)")
    p.add_argument("--die-at-step", type=int, default=None,
                   help="test hook: rank 1 (or 0 alone) SIGKILLs itself before this step on the first attempt")
    return p.parse_args(argv)


def make_data(seed: int, n: int, features: int = 32, classes: int = 10) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    y = (x @ w + 0.5 * torch.randn(n, classes, generator=g)).argmax(dim=1)
    return TensorDataset(x, y)


def make_model(hidden: int, features: int = 32, classes: int = 10) -> nn.Module:
    # Dropout makes the run depend on the torch RNG: a resume that forgot it would end elsewhere.
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, classes))


def parameters_checksum(model: nn.Module) -> str:
    sha = hashlib.sha256()
    for name, t in unwrap(model).state_dict().items():
        sha.update(name.encode())
        sha.update(t.detach().cpu().contiguous().numpy().tobytes())
    return sha.hexdigest()


def main(argv: list[str] | None = None) -> int:
    try:
        return train(parse_args(argv))
    except GuardError as exc:  # one line, as every gpuwise command reports bad input
        print(f"gpuwise.guard: error: {exc}", file=sys.stderr, flush=True)
        return 2


def train(args: argparse.Namespace) -> int:
    torch.set_num_threads(1)  # same thread count on every run: bit-identical CPU results
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        torch.distributed.init_process_group("gloo" if args.device == "cpu" else "nccl")
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda" and world > 1:  # one GPU per worker under torchrun
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    model = make_model(args.hidden).to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1.0 + 0.01 * s))
    guard = Guard(args.checkpoint_dir, model, optimizer, scheduler=scheduler, every_steps=args.save_every,
                  every_minutes=args.every_minutes, keep=args.keep, run_log=args.run_log,
                  async_save=args.async_save, grace_s=args.grace_s, micro_batch_size=args.micro_batch_size,
                  allow_fresh=args.fresh, max_save_failures=args.max_save_failures)
    guard.loader(make_data(args.seed, args.samples), batch_size=args.batch_size, seed=args.seed)
    guard.resume()

    def loss_fn(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(model(x.to(device)), y.to(device))

    step_fn = loss_fn
    if args.inject_oom_above is not None and args.inject_oom_rank in (None, rank):
        step_fn = inject_oom_above(loss_fn, args.inject_oom_above)
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    for batch in guard.batches(max_steps=args.steps):
        if args.die_at_step is not None and guard.step_count + 1 == args.die_at_step and first_attempt \
                and rank == min(1, world - 1):
            os.kill(os.getpid(), signal.SIGKILL)
        loss = guard.step(batch, step_fn)
        if rank == 0:
            print(f"step={guard.step_count} epoch={guard.epoch} loss={loss:.6f} "
                  f"micro_batch={guard.micro_batch_size or args.batch_size}", flush=True)
        if args.step_sleep_s:
            time.sleep(args.step_sleep_s)
    guard.close()
    checksum = parameters_checksum(model)
    if world > 1:
        # Every rank done with its last collective before any tears the group down: without the barrier
        # gloo's connection threads of a rank still finishing can abort the other at exit.
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    if rank == 0:
        print(f"final_checksum={checksum}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
