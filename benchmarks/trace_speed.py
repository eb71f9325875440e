"""Trace wall time (and CPU time) for the models of issue 3 at their default input sizes.

Usage: python benchmarks/trace_speed.py [--out benchmarks/results/trace_speed.json]
Runs every case in one process (imports and torch's first-use warm-up are paid once, by the first
case; the cold figure is measured separately by running one case in a fresh process).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

CASES = [
    dict(model="torchvision:resnet18", batch_size=32),
    dict(model="torchvision:resnet50", batch_size=128, optimizer="momentum"),
    dict(model="torchvision:resnet50", batch_size=64, precision="amp-fp16"),
    dict(model="torchvision:resnet101", batch_size=32),
    dict(model="torchvision:vit_b_16", batch_size=32),
    dict(model="torchvision:efficientnet_b0", batch_size=32),
    dict(model="torchvision:convnext_tiny", batch_size=32),
    dict(model="torchvision:mobilenet_v3_large", batch_size=32),
    dict(model="hf:bert-base-uncased", batch_size=32, seq_len=128),
    dict(model="hf:bert-base-uncased", batch_size=8, seq_len=512, precision="amp-fp16"),
    dict(model="hf:bert-large-uncased", batch_size=32, seq_len=128),
    dict(model="hf:bert-large-uncased", batch_size=4, seq_len=512),
    dict(model="hf:gpt2", batch_size=8, seq_len=1024),
    dict(model="hf:gpt2-medium", batch_size=4, seq_len=1024, precision="amp-bf16"),
    dict(model="hf:meta-llama/Llama-3.2-1B", batch_size=4, seq_len=1024, precision="amp-bf16"),
]


def _peak_bytes(trace) -> int:
    live = peak = 0
    for e in trace.events:
        live += e.size_bytes if e.kind == "alloc" else -e.size_bytes
        peak = max(peak, live)
    return peak


def run_case(case: dict) -> dict:
    wall = time.perf_counter()
    cpu = time.process_time()
    trace = trace_workload(Workload(**case))
    return {**case, "wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
            "ops": len(trace.ops), "events": len(trace.events), "params": trace.param_count,
            "live_peak_bytes": _peak_bytes(trace), "flops": trace.flops}


def cold_resnet50_s() -> dict:
    """ResNet-50 bs128 in a fresh process: import time, then the first trace (wall and CPU)."""
    code = ("import time; t=time.perf_counter(); import torch, torchvision, gpuwise.trace.tracer; "
            "from gpuwise.trace import trace_workload; from gpuwise.workload import Workload; "
            "t1=time.perf_counter(); c1=time.process_time(); "
            "trace_workload(Workload(model='torchvision:resnet50', batch_size=128, optimizer='momentum')); "
            "print(round(t1-t, 2), round(time.perf_counter()-t1, 2), round(time.process_time()-c1, 2))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return {"import_s": float(out[0]), "trace_wall_s": float(out[1]), "trace_cpu_s": float(out[2])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results/trace_speed.json")
    parser.add_argument("--only", default="", help="substring of the model names to run")
    args = parser.parse_args()
    results = []
    for case in CASES:
        if args.only and args.only not in case["model"]:
            continue
        row = run_case(case)
        results.append(row)
        print(json.dumps(row), flush=True)
    cold = cold_resnet50_s() if not args.only else None
    print(json.dumps({"cold_resnet50_bs128_trace_s": cold}))
    with open(args.out, "w") as f:
        json.dump({"date": "2026-12-02", "machine": platform.processor() or platform.machine(),
                   "cold_resnet50_bs128_trace_s": cold, "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
