"""Lone eager operators as gpuwise times them, against LLMCompass's wall-clock timings on an A100 80GB.

    python -m benchmarks.lone_ops     # writes benchmarks/results/lone_ops.md (+ .json)

Protocol (benchmarks/README.md, eleventh session, written before the first score):
``kernels-modern/llmcompass_a100_real_hw.csv``'s NVIDIA rows, fp16 ``torch.matmul``, softmax, layer norm and GELU
over sizes, each timed alone (``time.time()`` around the call and ``torch.cuda.synchronize()``, the median of N).
**Nothing is fitted on these rows**: every row is held out, scored once.

* predicted: each row becomes a model file the product's tracer runs (``mode=infer``, ``precision=fp16``); a
  lone call is the sum over its traced ops of ``runtime.kernels.op_times``' host cost **plus** its GPU time (the
  host issues the call, then the GPU runs it). Beside it, what ``estimate`` prints for a one-op model
  (``predict_step_time``: the smooth max of host and GPU, a stream of kernels).
* GPU: the SKU is not stated; both A100 80GB cards of the catalog are scored, each with its own baselines.
* baselines on the same rows: the kernel-only roofline (max(FLOPs / fp16 dense peak, bytes / datasheet
  bandwidth)) and roofline / 0.75; a sensitivity column adds the product's host cost to the roofline.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks.harness import (CELL_HEADER, DATA, ROOFLINE, ROOFLINE_075, Case, comparison_row, record_scoring,
                                scored_words, summarize_cases, verdict, write_results)
from gpuwise.catalog import load_catalog
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.kernels import op_times
from gpuwise.runtime.predict import predict_step_time
from gpuwise.runtime.rates import rate_peak_flops_per_s
from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

HELD_OUT_SET = "lone operators: LLMCompass A100"
SOURCE = DATA / "kernels-modern" / "llmcompass_a100_real_hw.csv"
GPUS = ("a100-80gb-sxm4", "a100-80gb-pcie")
PRECISION = "fp16"
HALF = 2
OPERATORS = ("matmul", "softmax", "layernorm", "gelu")
ROOF_HOST = "roofline + host"
STEP = "estimate's step (smooth max)"
MODEL = "gpuwise (host + kernel)"

# One factory per row: the module and its example inputs (float32 here; precision fp16 casts inputs and weights).
MODEL_FILE_HEAD = '''import torch
from torch import nn
import torch.nn.functional as F


class MatMul(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class Gelu(nn.Module):
    def forward(self, x):
        return F.gelu(x)
'''
FACTORY = {
    "matmul": "def {name}(batch_size):\n    return MatMul(), (torch.empty({m}, {k}), torch.empty({k}, {n}))\n",
    "softmax": "def {name}(batch_size):\n    return Softmax(), (torch.empty({m}, {n}),)\n",
    "layernorm": "def {name}(batch_size):\n    return nn.LayerNorm({n}), (torch.empty({m}, {n}),)\n",
    "gelu": "def {name}(batch_size):\n    return Gelu(), (torch.empty({m}),)\n",
}


def load() -> pd.DataFrame:
    d = pd.read_csv(SOURCE)
    d = d[d.gpu.str.startswith("NVIDIA")].copy()
    for col in ("M", "N", "K"):
        d[col] = pd.to_numeric(d[col], errors="coerce").fillna(0).astype(int)
    d["name"] = [f"{r.operator}_{r.M}_{r.N}_{r.K}" for r in d.itertuples()]
    assert set(d.operator) == set(OPERATORS) and (d.dtype == PRECISION).all(), d[["operator", "dtype"]].drop_duplicates()
    return d.reset_index(drop=True)


def model_file(d: pd.DataFrame, folder: Path) -> Path:
    path = folder / "llmcompass_ops.py"
    body = [MODEL_FILE_HEAD] + [FACTORY[r.operator].format(name=r.name, m=r.M, n=r.N, k=r.K)
                                for r in d.itertuples()]
    path.write_text("\n\n".join(body))
    return path


def roofline_s(r, gpu) -> float:
    """Kernel only: max(FLOPs / fp16 dense peak, bytes / datasheet bandwidth)."""
    bw, peak = gpu.memory_bandwidth_gbs * 1e9, rate_peak_flops_per_s(gpu, PRECISION)
    if r.operator == "matmul":
        return max(2.0 * r.M * r.N * r.K / peak, HALF * (r.M * r.K + r.K * r.N + r.M * r.N) / bw)
    elements = r.M * r.N if r.operator in ("softmax", "layernorm") else r.M
    return HALF * 2 * elements / bw


def main() -> None:
    t0 = time.time()
    d = load()
    cal = load_calibration()
    gpus = {g.id: g for g in load_catalog(user_file=False).gpus}
    cases: dict[str, list[Case]] = {g: [] for g in GPUS}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = model_file(d, Path(tmp))
        traces = {r.name: trace_workload(Workload(f"{path}:{r.name}", mode="infer", precision=PRECISION, batch_size=1))
                  for r in d.itertuples()}
    for r in d.itertuples():
        trace = traces[r.name]
        measured = float(r.time_ms) * 1e-3
        for gid in GPUS:
            gpu = gpus[gid]
            times = op_times(trace.ops, gpu, PRECISION, cal)
            host = sum(t.host_s for t in times)
            device = sum(t.device_s for t in times)
            roof = roofline_s(r, gpu)
            step = predict_step_time(trace, gpu, calibration=cal).step_time_s
            kind = "host-dominated" if roof < host else "kernel-dominated"
            case = Case(f"{gid}:{r.name}", HELD_OUT_SET, "held-out", host + device, measured, "s",
                        {ROOFLINE: roof, ROOFLINE_075: roof / 0.75, ROOF_HOST: roof + host, STEP: step})
            cases[gid].append(case)
            rows.append({"gpu": gid, "operator": r.operator, "M": r.M, "N": r.N, "K": r.K, "kind": kind,
                         "ops": ",".join(op.op for op in trace.ops), "measured_us": measured * 1e6,
                         "host_us": host * 1e6, "device_us": device * 1e6, "roofline_us": roof * 1e6,
                         "step_us": step * 1e6, "error": case.error})
    record_scoring(HELD_OUT_SET)
    r = pd.DataFrame(rows)
    cols = (ROOFLINE, ROOFLINE_075, ROOF_HOST, STEP)
    header = [f"| rows | n | {MODEL} | {' | '.join(cols)} |", "|---|---|---|" + "---|" * len(cols)]
    lines = ["# Lone eager operators: LLMCompass's A100 80GB timings", "",
             f"Script: `benchmarks/lone_ops.py`; protocol: `benchmarks/README.md`, eleventh session. Data: "
             f"`kernels-modern/llmcompass_a100_real_hw.csv` (PrincetonUniversity/LLMCompass, fp16, PyTorch eager, "
             f"wall clock with synchronize, median), the {len(d)} NVIDIA rows; {scored_words(HELD_OUT_SET)}. "
             "Nothing is fitted on these rows. The source is held out, the GPU is not (the tensor-core law saw "
             "vidur's A100 GEMMs; the memory-bound laws and host costs NeuSight's A100 kernels).", "",
             f"Cells: {CELL_HEADER}. {MODEL}: the traced ops' host cost + GPU time (a lone call); "
             f"{STEP}: what `estimate` prints for a one-op model; {ROOF_HOST}: sensitivity, not a verdict.", ""]
    by_id = {c.id: c for cs in cases.values() for c in cs}
    for gid in GPUS:
        sub = r[r.gpu == gid]
        lines += [f"## As `{gid}`", "", *header]
        for op in OPERATORS:
            lines.append(comparison_row(op, [by_id[f"{gid}:{n}"] for n in
                                             (f"{x.operator}_{x.M}_{x.N}_{x.K}" for x in sub[sub.operator == op].itertuples())], cols))
        for kind in ("host-dominated", "kernel-dominated"):
            ids = [f"{gid}:{x.operator}_{x.M}_{x.N}_{x.K}" for x in sub[sub.kind == kind].itertuples()]
            lines.append(comparison_row(kind, [by_id[i] for i in ids], cols))
        lines.append(comparison_row("**all**", cases[gid], cols))
        lines += ["", verdict(cases[gid], model=MODEL), ""]
    lines += ["## Per row (as `a100-80gb-sxm4`)", "",
              "| op | M | N | K | measured (us) | host (us) | kernel (us) | gpuwise (us) | roofline (us) | error |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for x in r[r.gpu == GPUS[0]].itertuples():
        lines.append(f"| {x.operator} | {x.M} | {x.N} | {x.K or ''} | {x.measured_us:.1f} | {x.host_us:.0f} | "
                     f"{x.device_us:.1f} | {x.host_us + x.device_us:.1f} | {x.roofline_us:.1f} | {x.error:+.1%} |")
    lines += ["", f"{len(d)} rows, {time.time() - t0:.0f} s."]
    summary = {gid: {"all": summarize_cases(cs), **{b: summarize_cases(cs, b) for b in cols}}
               for gid, cs in cases.items()}
    write_results("lone_ops", lines, {"summary": summary, "rows": rows})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
