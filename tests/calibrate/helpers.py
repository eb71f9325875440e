"""Small real pieces for the calibration tests: a tiny model file, a real guarded CPU training script,
replay frames of an RTX 4090, and run logs written through the real RunLog (what a run on a GPU leaves)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from gpuwise.runlog import RunLog

GPU_NAME = "NVIDIA GeForce RTX 4090"
GIB = 2**30

MLP = textwrap.dedent("""
    import torch
    from torch import nn


    def build():
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


    def factory(batch_size: int = 16):
        return build(), (torch.empty(batch_size, 32),)
""")

TRAIN = textwrap.dedent("""
    import sys

    import torch
    import torch.nn.functional as F
    from torch.utils.data import TensorDataset

    sys.path.insert(0, sys.argv[3])
    from mlp import build
    from gpuwise.guard import Guard

    torch.manual_seed(0)
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(512, 32), torch.randint(0, 10, (512,)))
    workload = {"model": sys.argv[4], "batch_size": 16, "precision": "fp32", "optimizer": "adamw"}
    with Guard(sys.argv[1], model, opt, run_log=sys.argv[2], workload=workload, verbose=False) as guard:
        guard.loader(data, batch_size=16, seed=0)
        for batch in guard.batches(max_steps=16):
            guard.step(batch, lambda b: F.cross_entropy(model(b[0]), b[1]))
""")


def write_model(folder: Path) -> str:
    """The model file; returns its spec (path:factory)."""
    (folder / "mlp.py").write_text(MLP)
    return f"{folder / 'mlp.py'}:factory"


def write_train_script(folder: Path) -> Path:
    p = folder / "train.py"
    p.write_text(TRAIN)
    return p


def replay_frames(path: Path, *, process_bytes: int, name: str = GPU_NAME, frames: int = 5) -> Path:
    """An RTX 4090 at work; the job's process (a pid that no longer exists: matched as 'all') holds
    ``process_bytes``."""
    sample = {"gpu_index": 0, "uuid": "GPU-4090", "name": name, "utilization_pct": 90,
              "memory_used_bytes": process_bytes, "memory_total_bytes": 24 * GIB,
              "processes": [{"pid": 4_000_000, "used_memory_bytes": process_bytes}]}
    path.write_text(json.dumps({"driver_version": "550.54.15", "frames": [[sample]] * frames}))
    return path


def synthetic_log(path: Path, *, workload: dict | None, step_time_s: float | None, gpu_name: str = GPU_NAME,
                  steps: int = 12, process_bytes: int | None = 2 * GIB, reserved_bytes: int | None = GIB,
                  allocated_bytes: int = GIB // 2) -> Path:
    """A run log as `gpuwise run --model … --torch-hook` around a guarded job leaves it on a GPU."""
    with RunLog(path) as log:
        log.set_meta("driver_version", "550.54.15")
        log.set_meta("torch_version", "2.5.1")
        log.set_meta("cuda_version", "12.4")
        if workload is not None:
            log.set_meta("workload", workload)
        for i in range(5):
            log.write_gpu_samples([{"t_s": 1000.0 + i, "gpu_index": 0, "uuid": "GPU-x", "name": gpu_name,
                                    "utilization_pct": 95.0, "memory_used_bytes": process_bytes or GIB,
                                    "memory_total_bytes": 24 * GIB, "process_memory_bytes": process_bytes,
                                    "process_match": "pid" if process_bytes else None}])
        if step_time_s is not None:
            for step in range(1, steps + 1):
                log.log_train(step, t_s=1000.0 + step, loss=1.0, step_time_s=step_time_s * (3 if step == 1 else 1))
        if reserved_bytes is not None:
            log.log_event("torch_memory", json.dumps({"pid": 1, "devices": [
                {"device": 0, "max_allocated_bytes": allocated_bytes, "max_reserved_bytes": reserved_bytes}]}))
    return path


# A measure.py result file's GPU and one measured row, as benchmarks/gpu/measure.py writes them (tests of the
# measure-JSON reader change one figure at a time).
GIB = 2**30
MEASURED_GPU = {"name": "NVIDIA H100 80GB HBM3", "nvml_name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15",
                "cuda": "12.4", "torch": "2.5.1", "dry_run": False}
MEASURED_ROW = {"id": "r18", "workload": {"model": "torchvision:resnet18", "batch_size": 256, "optimizer": "momentum"},
                "status": "ok", "median_step_time_s": 0.05, "step_times_s": [0.05] * 10,
                "max_memory_allocated_bytes": 5 * GIB, "max_memory_reserved_bytes": 6 * GIB,
                "nvml_process_bytes": 7 * GIB}
