"""The host cost of one eager PyTorch operator on GPU machines, from NeuSight's lone timed calls.

    python -m benchmarks.launch_floor     # writes benchmarks/results/time_launch.md (+ .json)

Each row of ``shared/data/public-benchmarks/kernels/`` is one eager call timed alone with CUDA events
(mean of the 5 fastest of 25). The GPU is idle before it, so the start event is stamped at once and the
kernel starts only when the host has dispatched the op: the fastest call of an operator on a machine
(its floor) is the host's cost of that eager call there (Python, dispatcher, library call, launch, and
the event records) plus a near-empty kernel. Five machines (P4, P100, T4, V100, A100 servers: the GPU
hardly matters for a tiny kernel, the CPU does); ``runtime/host.py`` takes the median over machines
per operator class. The dev machine's own measurement (``host_overhead.py``: the Python side only,
no GPU) is 2-5x lower: a cloud GPU server's cores, driver and launch path are what a user runs on.
A measurement that sets constants, not a prediction scored on held-out rows: no held-out set, no baseline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.harness import DATA, write_results
from gpuwise.runtime import host

# NeuSight folder -> the host model's class (runtime/classify.py's names; bmm is the matmul class too)
CLASS_OF = {"conv": "conv", "linear": "matmul", "bmm": "matmul-batched", "ln": "norm", "softmax": "softmax",
            **{op: "elementwise" for op in ("add", "mul", "div", "pow", "addu", "mulu", "divu", "powu", "relu",
                                             "gelu", "tanh")}}


def floors() -> pd.DataFrame:
    rows = []
    for folder, cls in CLASS_OF.items():
        for f in sorted((DATA / "kernels" / folder).glob("*.csv.gz")):
            lat = pd.read_csv(f, usecols=["Latency"]).Latency
            rows.append({"class": cls, "folder": folder, "machine": f.name.removesuffix(".csv.gz"),
                         "floor_us": float(lat.min() * 1e3)})
    return pd.DataFrame(rows)


def main() -> None:
    d = floors()
    per_machine = d.groupby(["class", "machine"]).floor_us.median().unstack()
    medians = per_machine.median(axis=1)
    lines = ["# Host cost of an eager operator on GPU machines", "",
             "Script: `benchmarks/launch_floor.py`. Data: `shared/data/public-benchmarks/kernels/` "
             "(NeuSight, PyTorch 2.1, CUDA events, a lone call: the fastest call of each operator on each machine).", "",
             "| class | " + " | ".join(per_machine.columns) + " | median (us) | runtime/host.py (us) |",
             "|---|" + "---|" * (len(per_machine.columns) + 2)]
    shipped_us = {}
    for cls, row in per_machine.iterrows():
        used = host.FORWARD_CALL_S.get({"matmul-batched": "matmul", "softmax": "reduction"}.get(cls, cls))
        shipped = f"{used * 1e6:.0f}" if used else "-"
        shipped_us[cls] = used * 1e6 if used else None
        lines.append(f"| {cls} | " + " | ".join(f"{x:.1f}" if np.isfinite(x) else "-" for x in row)
                     + f" | {medians[cls]:.1f} | {shipped} |")
    lines += ["", "The build machine's Python-side figures (`time_host.md`) were 6-23 us per call plus priors for "
              "the launch (5 us) and cuDNN (10 us): 11-31 us, against the 26-68 us measured here. The matmul "
              "class takes the linear call (nn.Linear, the common case); a bare torch.bmm call is cheaper (31 us).", ""]
    write_results("launch_floor", lines, {
        "floor_us": {cls: {m: (float(x) if np.isfinite(x) else None) for m, x in row.items()}
                     for cls, row in per_machine.iterrows()},
        "median_us": {cls: float(x) for cls, x in medians.items()}, "runtime_host_us": shipped_us})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
