"""How long the first questions take, as ratios measured in one run (issue 14's speed targets).

    python benchmarks/cli_speed.py [--repeats 3] [--out benchmarks/results/cli_speed.json]

Every command runs in a fresh interpreter, as a user types it; each figure is the median of
``--repeats`` runs, interleaved so that load on the (shared) machine falls on all of them alike.

- a refused typo (`gpuwise estimate torchvision:resnet5`) against `python -c "import torch"`: target <= 0.2
- a repeated ResNet-50 estimate (the trace in the on-disk cache) against its first run: target <= 0.3
- a cold ResNet-50 estimate (`--no-cache`) against `python -c "import torch, torchvision"`: target <= 1.5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPUWISE = [sys.executable, "-m", "gpuwise.cli.app"]
RESNET50 = ["estimate", "torchvision:resnet50", "--batch-size", "32", "--gpu", "rtx-4090", "--json"]
TARGETS = {"typo / import torch": 0.2, "repeated / first estimate": 0.3, "cold estimate / import torch+torchvision": 1.5}


def wall_s(cmd: list[str], env: dict, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if r.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-500:]}")
    return elapsed


def measure(repeats: int) -> dict:
    times: dict[str, list[float]] = {k: [] for k in
                                     ("import torch", "import torch+torchvision", "typo", "first estimate",
                                      "repeated estimate", "cold estimate")}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "GPUWISE_CACHE_DIR": cache, "GPUWISE_NO_CACHE": "0"}
            times["import torch"].append(wall_s([sys.executable, "-c", "import torch"], env))
            times["typo"].append(wall_s([*GPUWISE, "estimate", "torchvision:resnet5"], env, ok=(2,)))
            times["first estimate"].append(wall_s([*GPUWISE, *RESNET50], env))
            times["repeated estimate"].append(wall_s([*GPUWISE, *RESNET50], env))
            times["import torch+torchvision"].append(wall_s([sys.executable, "-c", "import torch, torchvision"], env))
            times["cold estimate"].append(wall_s([*GPUWISE, *RESNET50, "--no-cache"], env))
    median = {k: statistics.median(v) for k, v in times.items()}
    ratios = {
        "typo / import torch": median["typo"] / median["import torch"],
        "repeated / first estimate": median["repeated estimate"] / median["first estimate"],
        "cold estimate / import torch+torchvision": median["cold estimate"] / median["import torch+torchvision"],
    }
    return {"date": time.strftime("%Y-%m-%d"), "repeats": repeats, "median_wall_s": median, "runs_s": times,
            "ratios": ratios, "targets": TARGETS, "met": {k: ratios[k] <= TARGETS[k] for k in ratios}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = measure(args.repeats)
    for name, ratio in result["ratios"].items():
        print(f"{name:45s} {ratio:5.2f}  (target <= {TARGETS[name]}: {'met' if result['met'][name] else 'NOT met'})")
    for name, seconds in result["median_wall_s"].items():
        print(f"  {name:28s} {seconds:6.2f} s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
