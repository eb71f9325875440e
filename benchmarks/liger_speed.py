"""Per-kernel GPU time against Liger-Kernel's speed rows of plain PyTorch operators (issue 28 item 1).

    python -m benchmarks.liger_speed     # writes benchmarks/results/liger_speed.md (+ .json)

Protocol (benchmarks/README.md, "Twelfth session", written before the first score): the eager PyTorch /
Hugging Face reference rows of ``kernels-modern/liger_kernel_bench.csv.gz`` (``metric == speed``: Triton
``do_bench``, CUDA events around each call behind a 256 MB L2 flush, p50), for layer_norm, rms_norm, swiglu,
geglu, cross_entropy and embedding. Each row is rebuilt as Liger 0.5.10's or 0.8.0's script builds it (the
0.5.10 rows by the same ``op_memory.setup_for`` the memory score uses), run three times on fake tensors under
the product's recorder, and the last call's ops of the row's mode are timed by ``runtime.kernels.op_times`` at
the shipped laws: the prediction is their GPU time (``device_s``; the host runs ahead of ``do_bench``'s
events). One constant is fitted on these rows, on the seen GPUs' only (``--fit``: the per-SM limit of
unvectorized elementwise kernels, ``eager_bytes_per_sm_clock``); its form was chosen after every row had been
scored, so the held-out GPUs' figure is in-sample since then (benchmarks/README.md). Baselines on the same
traced ops: the roofline (sum of max(FLOPs / peak, bytes / bandwidth)) and roofline / 0.75.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import logging
import math
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from unittest.mock import patch

import torch
from torch import nn

from benchmarks.harness import (CELL_HEADER, DATA, ROOFLINE, ROOFLINE_075, Case, comparison_row, record_scoring,
                                scored_words, verdict, write_results)
from benchmarks.op_memory import DTYPES, LlamaRMSNorm, Setup, _cross_entropy, _mlp, run_calls, setup_for
from gpuwise.catalog import CatalogError, load_catalog, resolve_gpu
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.kernels import op_times
from gpuwise.runtime.laws import load_laws
from gpuwise.runtime.rates import rate_peak_flops_per_s

SOURCE = DATA / "kernels-modern" / "liger_kernel_bench.csv.gz"
HELD_OUT_SET = "Liger speed: plain-PyTorch rows"
OPERATORS = ("layer_norm", "rms_norm", "swiglu", "geglu", "cross_entropy", "embedding")
PROVIDERS = ("huggingface", "torch")
MODES = {"forward": ("forward",), "backward": ("backward",), "full": ("forward", "backward")}
# GPUs whose kernels some shipped law was fitted on (NeuSight fp32: A100; vidur fp16: A100, H100 SXM).
SEEN_GPUS = ("a100-40gb-sxm4", "a100-40gb-pcie", "a100-80gb-sxm4", "a100-80gb-pcie", "h100-sxm")
PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
# Which tensor Liger's script passes as ``grad_to_none`` in each mode (None: it passes none).
GRAD_TO_NONE = {"layer_norm": "x", "rms_norm": "x", "swiglu": "x", "geglu": "x", "embedding": None}
CE_GRAD_TO_NONE = {"forward": None, "backward": "input", "full": None}


@dataclass(frozen=True)
class Timed:
    device_s: float
    host_s: float
    roofline_s: float
    kernels: int
    ops: str


def traced_ops(setup: Setup, clear_grad: str | None):
    """The script's calls on fake tensors (``op_memory.run_calls``); the ops of the last call, each with its phase."""
    return run_calls(setup, clear_grad).ops


def time_ops(ops, gpu, precision: str, cal) -> Timed:
    times = op_times(ops, gpu, precision, cal)
    bw = gpu.memory_bandwidth_gbs * 1e9
    roof = 0.0
    for op, t in zip(ops, times):
        if t.cls == "view":
            continue
        peak = rate_peak_flops_per_s(gpu, t.rate) if t.rate != "bandwidth" else float("inf")
        roof += max(op.flops / peak, (op.bytes_read + op.bytes_written) / bw)
    return Timed(sum(t.device_s for t in times), sum(t.host_s for t in times), roof,
                 sum(t.kernels for t in times if t.cls != "view"),
                 ",".join(op.op.removeprefix("aten.").removesuffix(".default") for op, t in zip(ops, times)
                          if t.cls != "view"))


def _norm_v08(op: str, tokens: int, cfg: dict) -> Setup:
    """Liger 0.8.0's norm scripts: x of (bsz x T) x hidden in the row's dtype, the module in that dtype, and
    the ``full`` call drawing its upstream gradient inside (``utils.run_speed_benchmark``)."""
    n, dtype, eps = cfg["hidden_size"], DTYPES[cfg["dtype"]], cfg["eps"]
    with torch.device("meta"):
        mod = nn.LayerNorm(n, eps=eps).to(dtype) if op == "layer_norm" else LlamaRMSNorm(n, eps=eps)

    def tensors():
        return {"x": torch.randn((cfg["bsz"] * tokens, n), dtype=dtype, requires_grad=True)}

    def call(m, t, backward):
        y = m(t["x"])
        dy = torch.randn_like(y)
        backward()
        y.backward(dy, retain_graph=True)

    return Setup((mod,), tensors, call, lambda t, m: 0)


def setup_v08(op: str, x: int, cfg: dict) -> Setup | None:
    """The setup of a row written by Liger >= 0.8's scripts (a T or BT sweep); None for other rows."""
    if op in ("layer_norm", "rms_norm") and {"bsz", "hidden_size", "dtype", "eps"} <= set(cfg):
        return _norm_v08(op, x, cfg)
    if op in ("swiglu", "geglu") and {"bsz", "seq_len"} <= set(cfg):
        return _mlp(op, x, {**cfg, "B": cfg["bsz"]})
    if op == "cross_entropy" and "vocab_size" in cfg:
        return _cross_entropy(cfg["vocab_size"], {"B": x, "T": 1})
    return None


def load_rows() -> list[dict]:
    with gzip.open(SOURCE, "rt", newline="") as f:
        return [r for r in csv.DictReader(f)
                if r["is_plain_pytorch"] == "True" and r["metric"] == "speed" and r["provider"] in PROVIDERS
                and r["operator"] in OPERATORS and r["mode"] in MODES and r["gpu"].startswith("NVIDIA")]


def _dtype(cfg: dict, op: str) -> str:
    return "float32" if op == "cross_entropy" else cfg["dtype"].removeprefix("torch.")


@dataclass(frozen=True)
class Row:
    """One scored row: what Liger measured and the traced ops of its mode."""

    case_id: str
    operator: str
    mode: str
    gpu: object
    dtype: str
    x_name: str
    x: int
    config: dict
    liger_version: str
    measured_s: float
    ops: tuple

    @property
    def seen(self) -> bool:
        return self.gpu.id in SEEN_GPUS


def build_rows() -> tuple[list[Row], dict[str, int], int]:
    """Every row the protocol scores (each traced once per distinct setup), what was left out and why,
    and the number of traces."""
    logging.getLogger("transformers").setLevel(logging.ERROR)
    catalog = load_catalog(user_file=False)
    rows: list[Row] = []
    left_out: dict[str, int] = defaultdict(int)
    traces: dict[tuple, tuple] = {}
    for i, row in enumerate(load_rows()):
        op, mode, cfg = row["operator"], row["mode"], json.loads(row["extra_config"])
        try:
            x = int(float(row["x_value"]))
        except ValueError:
            left_out[f"{op}: a sweep over named configs ({row['x_name']})"] += 1
            continue
        try:
            gpu = resolve_gpu(catalog, row["gpu"])
        except CatalogError:
            left_out[f"GPU not in the catalog ({row['gpu']})"] += 1
            continue
        clear = CE_GRAD_TO_NONE[mode] if op == "cross_entropy" else GRAD_TO_NONE[op]
        key = (op, x, row["extra_config"], clear)
        if key not in traces:
            setup = setup_for(op, x, cfg) or setup_v08(op, x, cfg)
            if setup is None:
                left_out[f"{op}: a config neither Liger 0.5.10's nor 0.8.0's script fixes ({row['x_name']} sweep)"] += 1
                continue
            traces[key] = traced_ops(setup, clear)
        # The setup's call draws the upstream gradient (randn_like) after the forward; the script's
        # ``forward`` mode times the module call alone, its ``full`` mode the draw too.
        ops = tuple(o for o in traces[key] if o.phase in MODES[mode]
                    and not (mode == "forward" and o.op.startswith("aten.randn")))
        rows.append(Row(f"{i}:{op}/{mode}/{row['x_name']}={x}/{gpu.id}/liger-{row['liger_version']}", op, mode, gpu,
                        _dtype(cfg, op), row["x_name"], x, cfg, row["liger_version"],
                        float(row["value_p50"]) * 1e-3, ops))
    return rows, dict(left_out), len(traces)


def fit_k(rows: list[Row], cal) -> tuple[float, list[tuple[float, float]]]:
    """The protocol's fit of ``eager_bytes_per_sm_clock`` on the seen GPUs' rows only: the k of a grid (0.5
    bytes apart, 2-32; 0 = no limit) with the smallest median |log(predicted / measured)|."""
    shipped = load_laws()
    seen = [r for r in rows if r.seen]
    trials = []
    for k in [0.0] + [x / 2 for x in range(4, 65)]:
        laws = replace(shipped, eager_bytes_per_sm_clock=k)
        with patch("gpuwise.runtime.kernels.load_laws", lambda laws=laws: laws):
            err = statistics.median(abs(math.log(time_ops(r.ops, r.gpu, PRECISION[r.dtype], cal).device_s
                                                 / r.measured_s)) for r in seen)
        trials.append((k, err))
    return min(trials, key=lambda t: t[1])[0], trials


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="fit eager_bytes_per_sm_clock on the seen GPUs' rows "
                        "only and print it (scores nothing, writes nothing)")
    args = parser.parse_args(argv)
    t0 = time.time()
    cal = load_calibration()
    rows, left_out, n_traces = build_rows()
    if not rows:
        raise SystemExit("liger_speed: no rows scored (is ../shared/data/public-benchmarks/kernels-modern/ there?)")
    if args.fit:
        k, trials = fit_k(rows, cal)
        print("\n".join(f"k = {t:4.1f} bytes / SM clock: median |log error| {e:.4f} on {sum(r.seen for r in rows)} "
                        "seen rows" for t, e in trials))
        print(f"fitted eager_bytes_per_sm_clock = {k} ({time.time() - t0:.0f} s)")
        return
    cases: list[Case] = []
    detail: list[dict] = []
    for r in rows:
        timed = time_ops(r.ops, r.gpu, PRECISION[r.dtype], cal)
        case = Case(r.case_id, HELD_OUT_SET, "GPU seen" if r.seen else "GPU held out", timed.device_s, r.measured_s,
                    "s", {ROOFLINE: timed.roofline_s, ROOFLINE_075: timed.roofline_s / 0.75})
        cases.append(case)
        detail.append({"case": case.id, "operator": r.operator, "mode": r.mode, "gpu": r.gpu.id, "seen": r.seen,
                       "dtype": r.dtype, "x_name": r.x_name, "x": r.x, "config": r.config,
                       "liger_version": r.liger_version, "measured_us": r.measured_s * 1e6,
                       "device_us": timed.device_s * 1e6, "host_us": timed.host_s * 1e6,
                       "roofline_us": timed.roofline_s * 1e6, "kernels": timed.kernels, "ops": timed.ops,
                       "host_could_show": timed.host_s > timed.device_s, "error": case.error})
    count = record_scoring(HELD_OUT_SET)
    cols = (ROOFLINE, ROOFLINE_075)
    header = ["| rows | n | gpuwise (GPU time) | roofline | roofline / 0.75 |", "|---|---|---|---|---|"]

    def group(label: str, pick) -> str:
        return comparison_row(label, [c for c, d in zip(cases, detail) if pick(d)], cols)

    held = [c for c, d in zip(cases, detail) if not d["seen"]]
    held_names = ", ".join(sorted({d["gpu"] for d in detail if not d["seen"]}))
    k = load_laws().eager_bytes_per_sm_clock
    lines = ["# Per-kernel GPU time against Liger's plain-PyTorch speed rows", "",
             f"Script: `benchmarks/liger_speed.py`; protocol: `benchmarks/README.md`, twelfth session. Data: "
             f"`kernels-modern/liger_kernel_bench.csv.gz` (linkedin/Liger-Kernel, Triton `do_bench` p50 behind an L2 "
             f"flush; mostly bf16), {len(cases)} rows of the eager PyTorch / Hugging Face references; "
             f"{scored_words(HELD_OUT_SET)} (this run is number {count}). One constant is fitted on the seen GPUs' "
             "rows (`--fit`); the limit's form was chosen after every row had been scored (twelfth session), so "
             "the held-out GPUs' figure is **in-sample**: the clean first scores are in benchmarks/README.md. "
             "Each row is rebuilt as Liger 0.5.10's or 0.8.0's script builds it, traced on fake tensors, and its mode's ops "
             "timed by the shipped laws: the prediction is their GPU time. Per-SM limit of PyTorch's elementwise "
             f"kernels (`eager_bytes_per_sm_clock`, fitted on the seen GPUs' rows): {k or 'none'}.", "",
             f"Cells: {CELL_HEADER}. Error = predicted / measured - 1 (negative: predicted fast).", "",
             "## By GPU group", "", *header,
             comparison_row(f"**GPU held out** ({held_names})", held, cols),
             group("GPU seen by a kernel fit (A100s, H100 SXM)", lambda d: d["seen"]),
             comparison_row("**all**", cases, cols), "", verdict(held, model="gpuwise (GPU held out)"),
             verdict(cases, model="gpuwise (all rows)"), "", "## By GPU", "", *header]
    for gid in sorted({d["gpu"] for d in detail}):
        lines.append(group(gid, lambda d, g=gid: d["gpu"] == g))
    lines += ["", "## By operator and mode", "", *header]
    for op in OPERATORS:
        for mode in MODES:
            if any(d["operator"] == op and d["mode"] == mode for d in detail):
                lines.append(group(f"{op} {mode}", lambda d, o=op, m=mode: d["operator"] == o and d["mode"] == m))
    lines += ["", "## Host cost", "", *header,
              group("host could show (product's host cost > its GPU time)", lambda d: d["host_could_show"]),
              group("GPU-dominated", lambda d: not d["host_could_show"]), "",
              "## Per run (operator, mode, GPU, Liger version, config): signed median and range over the swept size",
              "", "| operator | mode | GPU | dtype | Liger | n | measured (us, min..max) | signed median | signed min..max |",
              "|---|---|---|---|---|---|---|---|---|"]
    runs = defaultdict(list)
    for d in detail:
        runs[(d["operator"], d["mode"], d["gpu"], d["dtype"], d["liger_version"],
              json.dumps(d["config"], sort_keys=True))].append(d)
    for (op, mode, gid, dtype, version, _), ds in sorted(runs.items()):
        errs = [d["error"] for d in ds]
        lines.append(f"| {op} | {mode} | {gid} | {dtype} | {version} | {len(ds)} | "
                     f"{min(d['measured_us'] for d in ds):,.0f}..{max(d['measured_us'] for d in ds):,.0f} | "
                     f"{statistics.median(errs):+.1%} | {min(errs):+.1%}..{max(errs):+.1%} |")
    lines += ["", "Left out: " + ("; ".join(f"{n} rows: {why}" for why, n in sorted(left_out.items())) or "none") + ".",
              "", f"{len(cases)} rows, {n_traces} traces, {time.time() - t0:.0f} s."]
    write_results("liger_speed", lines, {"held_out_set": HELD_OUT_SET, "scored": count, "cases": cases,
                                         "detail": detail, "left_out": dict(left_out)})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
