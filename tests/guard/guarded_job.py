"""A tiny guarded job with state the caller updates after ``guard.step`` (an EMA of the weights, a counter in
``guard.extras``), and test hooks: SIGKILL or SIGTERM itself during a step (first attempt only), a step stuck
in ``loss_fn``, logging configured by the script.

    python guarded_job.py CKPT_DIR STEPS [--every N] [--kill-at K] [--term-at K] [--slow-at K] [--grace-s G]
                          [--log-config]

Prints ``step=N loss=L`` after the caller's code for each step ran, and as the last line
``final model=<sha> ema=<sha> n_averaged=N counter=N``.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import TensorDataset

from gpuwise.guard import Guard, GuardError


def _sha(module: nn.Module) -> str:
    return hashlib.sha256(b"".join(t.detach().numpy().tobytes() for t in module.state_dict().values())).hexdigest()[:16]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("ckpt")
    p.add_argument("steps", type=int)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--kill-at", type=int, default=None)
    p.add_argument("--term-at", type=int, default=None)
    p.add_argument("--slow-at", type=int, default=None)
    p.add_argument("--grace-s", type=float, default=20.0)
    p.add_argument("--log-config", action="store_true")
    args = p.parse_args()
    if args.log_config:
        logging.basicConfig(format="LOG %(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g))
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    marker = args.ckpt.rstrip("/") + ".once"
    first = not os.path.exists(marker)
    try:
        guard = Guard(args.ckpt, model, opt, every_steps=args.every, extra_state={"ema": ema}, grace_s=args.grace_s)
        guard.loader(data, batch_size=8, seed=0)
        guard.resume()
    except GuardError as exc:
        print(f"gpuwise.guard: error: {exc}", file=sys.stderr)
        return 2

    def loss_fn(b):
        step = guard.step_count + 1
        if first and step in (args.kill_at, args.term_at):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL if step == args.kill_at else signal.SIGTERM)
        if step == args.slow_at:
            print("slow", flush=True)
            time.sleep(300)
        return F.cross_entropy(model(b[0]), b[1])

    for batch in guard.batches(max_steps=args.steps):
        loss = guard.step(batch, loss_fn)
        ema.update_parameters(model)                                   # the caller's code for the step
        guard.extras["counter"] = guard.extras.get("counter", 0) + 1
        print(f"step={guard.step_count} loss={loss:.6f}", flush=True)
    guard.close()
    print(f"final model={_sha(model)} ema={_sha(ema)} n_averaged={int(ema.n_averaged)} "
          f"counter={guard.extras['counter']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
