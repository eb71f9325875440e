"""Memory-bound kernels on modern GPUs: the streaming laws against vidur's fp16 LLM-layer kernels.

    python -m benchmarks.memory_kernels     # writes benchmarks/results/time_memory_kernels.md (+ .json)

Protocol (benchmarks/README.md, fourth session): vidur's RMSNorm (``input_layernorm``,
``post_attention_layernorm``), residual ``add``, gated activation (``mlp_act``) and rotary embedding
(``attn_rope``) on A100, H100 and A40, one fold per GPU. Two predictions per held-out row:

* the shipped streaming laws (``kernel_laws.json``, fitted on NeuSight's fp32 kernels: RMSNorm under the
  ``norm`` law, the rest ``elementwise``), bytes as the kernels move them;
* the same form refitted on the other two GPUs' vidur rows: one bandwidth share per operator and one
  fixed cost per timed call.

Bytes (fp16, tokens T, hidden H, MLP width I and heads per tensor-parallel shard): RMSNorm reads and
writes T x H; add reads two T x H and writes one; the gated activation reads T x 2I and writes T x I
(phi-2, not gated: reads and writes T x I); rotary reads and writes q and k. Beside both, the roofline
(bytes / bandwidth) and roofline / 0.75 with the fold's fixed cost. Liger-Kernel's plain-PyTorch rows
are not scored here yet (their byte counts need each benchmark's own shapes).
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from benchmarks.harness import (CELL_HEADER, DATA, ROOFLINE, ROOFLINE_075, Case, comparison_row, record_scoring,
                                scored_words, summarize_cases, verdict, write_results)
from benchmarks.kernel_fit import ROBUST_SCALE, VIDUR_GPUS, catalog_specs, sig
from gpuwise.runtime.laws import load_laws

HELD_OUT_SET = "memory kernels: vidur, GPU-out"
SHIPPED, REFIT = "shipped streaming laws", "refitted on the other GPUs"
HALF = 2
LAW_OF = {"input_layernorm": "norm", "post_attention_layernorm": "norm", "add": "elementwise",
          "mlp_act": "elementwise", "attn_rope": "elementwise"}
OPS = tuple(LAW_OF)


def load() -> pd.DataFrame:
    d = pd.read_csv(DATA / "kernels-modern" / "vidur_mlp_ops.csv.gz")
    d = d[d.operator.isin(OPS)]
    shapes = pd.read_csv(DATA / "kernels-modern" / "vidur_model_shapes.csv").set_index("model")
    d = d.groupby(["gpu_dir", "model", "operator", "num_tokens", "tp"], as_index=False)["time_ms_median"].median()
    s = shapes.loc[d.model]
    t, tp = d.num_tokens.to_numpy(float), d.tp.to_numpy(float)
    h, inter = s.n_embd.to_numpy(float), s.n_expanded_embd.to_numpy(float) / tp
    head_dim = h / s.n_head.to_numpy(float)
    q = t * s.n_head.to_numpy(float) / tp * head_dim
    k = t * np.maximum(1, s.n_kv_head.to_numpy(float) / tp) * head_dim
    gated = s.gated_mlp.to_numpy(bool)
    elems = {"input_layernorm": 2 * t * h, "post_attention_layernorm": 2 * t * h, "add": 3 * t * h,
             "mlp_act": np.where(gated, 3 * t * inter, 2 * t * inter), "attn_rope": 2 * (q + k)}
    d["bytes"] = HALF * np.select([d.operator == op for op in OPS], [elems[op] for op in OPS])
    for key in ("bw",):
        d[key] = d.gpu_dir.map(lambda g, key=key: catalog_specs(VIDUR_GPUS[g])[key])
    d["latency_s"] = d.time_ms_median * 1e-3
    return d.reset_index(drop=True)


def fit(d: pd.DataFrame) -> tuple[dict, float]:
    """One bandwidth share per operator and one fixed cost, robust least squares on log latency."""
    ops = [op for op in OPS if (d.operator == op).any()]
    col = d.operator.map({op: i for i, op in enumerate(ops)}).to_numpy()
    t_bw = (d.bytes / d.bw).to_numpy()
    log_meas = np.log(d.latency_s.to_numpy())

    def residuals(theta):
        u = np.array([sig(x) for x in theta[:-1]])
        return np.log(math.exp(theta[-1]) + t_bw / u[col]) - log_meas

    res = least_squares(residuals, np.array([1.0] * len(ops) + [math.log(3e-6)]), loss="soft_l1",
                        f_scale=ROBUST_SCALE, diff_step=1e-4, max_nfev=300)
    return {op: sig(x) for op, x in zip(ops, res.x[:-1])}, math.exp(res.x[-1])


def main() -> None:
    t0 = time.time()
    d = load()
    laws = load_laws().streaming
    lines, cases = [], []
    for held in sorted(set(d.gpu_dir)):
        u, floor = fit(d[d.gpu_dir != held])
        h = d[d.gpu_dir == held]
        meas, t_bw = h.latency_s.to_numpy(), (h.bytes / h.bw).to_numpy()
        shipped_u = h.operator.map(lambda op: laws[LAW_OF[op]].u_max).to_numpy()
        refit_u = h.operator.map(u).to_numpy()
        mine = [Case(f"{held}:{model}:{op}:{tokens}:tp{tp}", HELD_OUT_SET, "held-out", floor + tb / su, m, "s",
                     {REFIT: floor + tb / ru, ROOFLINE: floor + tb, ROOFLINE_075: floor + tb / 0.75})
                for model, op, tokens, tp, m, tb, su, ru in zip(h.model, h.operator, h.num_tokens, h.tp, meas, t_bw,
                                                                 shipped_u, refit_u)]
        cases += mine
        lines.append(comparison_row(held, mine, (REFIT, ROOFLINE, ROOFLINE_075)))
        print(held, {op: round(x, 3) for op, x in u.items()}, f"floor {floor * 1e6:.1f} us", flush=True)
    lines.append(comparison_row("**all**", cases, (REFIT, ROOFLINE, ROOFLINE_075)))
    record_scoring(HELD_OUT_SET)
    u_all, floor_all = fit(d)
    out = ["# Memory-bound kernels on modern GPUs (vidur, fp16)", "",
           f"Script: `benchmarks/memory_kernels.py` ({time.time() - t0:.0f} s on this machine, {os.cpu_count()} cores). "
           "Data: `kernels-modern/vidur_mlp_ops.csv.gz` and `vidur_model_shapes.csv`. Protocol: the script's "
           f"docstring and `benchmarks/README.md` (fourth session; {scored_words(HELD_OUT_SET)}). Every column uses the "
           "fold's fitted fixed cost.", "",
           f"Error = predicted / measured latency - 1; cells: {CELL_HEADER}.", "",
           f"| held-out GPU | n | {SHIPPED} | {REFIT} | {ROOFLINE} | {ROOFLINE_075} |",
           "|---|---|---|---|---|---|", *lines, "",
           verdict(cases, ROOFLINE_075, f"gpuwise ({SHIPPED})"), "",
           "Bandwidth share per operator, fitted on all three GPUs: "
           + ", ".join(f"{op} {x:.2f}" for op, x in u_all.items()) + f"; fixed cost {floor_all * 1e6:.1f} us. Shipped "
           f"laws: norm {laws['norm'].u_max:.2f}, elementwise {laws['elementwise'].u_max:.2f} (NeuSight's fp32 "
           "kernels). Not shipped: the end-to-end figures were scored once with the shipped laws.", ""]
    gpus = sorted(set(d.gpu_dir))
    write_results("memory_kernels", out, {
        "set": HELD_OUT_SET,
        "held_out": {g: _summaries([c for c in cases if c.id.startswith(f"{g}:")]) for g in gpus},
        "all_held_out": _summaries(cases),
        "fit_on_all": {"share": u_all, "fixed_cost_s": floor_all}})
    print("\n".join(out))


def _summaries(cases: list[Case]) -> dict:
    return {SHIPPED: summarize_cases(cases), **{b: summarize_cases(cases, b) for b in (REFIT, ROOFLINE, ROOFLINE_075)}}


if __name__ == "__main__":
    main()
