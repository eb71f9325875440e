"""How long does a checkpoint block training? Synchronous vs asynchronous saves of a 100M- and a
1B-parameter fp32 state through gpuwise.guard's atomic CheckpointStore (sha256 + fsync + rename).

    python benchmarks/guard_save.py [--dir /tmp/guard-bench] [--sizes 100e6,1e9] [--repeats 3,1] [--json out.json]

Synchronous: training waits for serialise + hash + write + fsync + rename. Asynchronous: training waits
only for the copy of the state into host buffers (a copy on CPU; a device-to-host copy into pinned memory on a
GPU); the rest runs on a background thread. "async cold" is the first save (buffers allocated), "async warm"
the later ones (buffers reused). The state is the model weights only (optimizer state would add 2x for Adam).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

import torch

from gpuwise.guard import AsyncSaver, CheckpointStore, HostStaging


def make_state(n_params: int, chunk: int = 50_000_000) -> dict[str, torch.Tensor]:
    """``n_params`` fp32 parameters in tensors of at most ``chunk`` elements (like a model's layers)."""
    state, left, i = {}, n_params, 0
    while left > 0:
        n = min(chunk, left)
        state[f"layer{i}.weight"] = torch.empty(n, dtype=torch.float32).uniform_()
        left, i = left - n, i + 1
    return state


def measure(store: CheckpointStore, state: dict, step: int, mode: str, staging: HostStaging) -> dict:
    if mode == "sync":
        t0 = time.perf_counter()
        store.save({"model": state}, step, 0)
        blocked = time.perf_counter() - t0
        return {"mode": mode, "blocked_s": blocked, "total_s": blocked}
    # What Guard(async_save=True) does: copy into reusable host buffers ("cold": first save, buffers
    # allocated; "warm": later saves reuse them), then write on a background thread.
    saver = AsyncSaver()
    t0 = time.perf_counter()
    snapshot = staging.copy({"model": state})
    saver.submit(lambda: store.save(snapshot, step, 0))
    blocked = time.perf_counter() - t0
    saver.wait()
    total = time.perf_counter() - t0
    return {"mode": mode, "blocked_s": blocked, "total_s": total}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/gpuwise-guard-bench")
    ap.add_argument("--sizes", default="100e6,1e9")
    ap.add_argument("--repeats", default="3,1")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    repeats = [int(r) for r in args.repeats.split(",")]
    directory = Path(args.dir)
    shutil.rmtree(directory, ignore_errors=True)
    rows = []
    for n_params, reps in zip(sizes, repeats):
        state = make_state(n_params)
        store = CheckpointStore(directory / f"{n_params}", keep=1)
        staging = HostStaging()
        plan = ["sync"] * reps + ["async cold"] + ["async warm"] * reps
        for r, mode in enumerate(plan):
            row = measure(store, state, step=r, mode=mode, staging=staging)
            row.update(params=n_params, bytes=sum(t.numel() * 4 for t in state.values()), repeat=r)
            rows.append(row)
            print(json.dumps(row), flush=True)
        del state, staging
        shutil.rmtree(directory / f"{n_params}", ignore_errors=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "load_avg": os.getloadavg(), "dir": str(directory)}
    print(json.dumps(meta))
    print("\n| state | mode | training blocked (s) | save done after (s) |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['params'] / 1e6:.0f}M params, {row['bytes'] / 2**30:.2f} GiB | {row['mode']} "
              f"| {row['blocked_s']:.2f} | {row['total_s']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
