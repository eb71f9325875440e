"""Fit the tensor-core GEMM law and power level on vidur's fp16 GEMMs and MAMF; score held-out GPUs.

    python -m benchmarks.tensor_laws          # writes benchmarks/results/time_tensor_kernels.md (+ .json)
    python -m benchmarks.tensor_laws --ship   # and "tensor" and levels["tensor"] in
                                              # src/gpuwise/runtime/kernel_laws.json, which gpuwise uses

``make bench`` fits and scores without ``--ship`` (as ``kernel_laws``): the results say whether the
fit on everything reproduces the shipped law and level.

Protocol (benchmarks/README.md, fourth session, written before this was run): vidur's projections
(``attn_pre_proj``, ``attn_post_proj``, ``mlp_up_proj``, ``mlp_down_proj``: one GEMM each, fp16) on A100,
H100 and A40, one fold per GPU: the law and the power level are fitted on the other two GPUs' rows and on
MAMF's best achievable bf16 matmul of every GPU but the held-out one, then scored on every row of the
held-out GPU. MAMF alone is scored the same way (each GPU's ceiling predicted without its row). The
shipped law is the fit on everything.

The law is ``laws.tiled_time_s`` (tiles, waves, split-K) at the tensor-core peak x the GPU's sustained
share (``laws.PowerLevel``: TDP per peak TFLOPS), never faster than the operands through DRAM at the
shipped elementwise law's bandwidth, plus one fixed cost per timed call (vidur's timer; fitted, one
number for every GPU). A MAMF ceiling is the law's ``u_max x share``: MAMF's sweep finds the best shape,
where tile and wave losses are smallest. GPU specs are the catalog's (``kernel_fit.VIDUR_GPUS`` says
which GPU each vidur folder is). Baselines on the same rows: the roofline (fp16 datasheet peak,
bandwidth) and roofline / 0.75, each plus the fold's fitted fixed cost; for a MAMF ceiling, the
datasheet peak (share 1) and 0.75 of it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from benchmarks.harness import (CELL_HEADER, DATA, REPO, ROOFLINE, ROOFLINE_075, Case, comparison_row,
                                record_scoring, relative_error, scored_words, summarize, summarize_cases, verdict,
                                write_results)
from benchmarks.kernel_fit import MAX_FIT_ROWS, ROBUST_SCALE, VIDUR_GPUS, catalog_specs, sig
from gpuwise.runtime.laws import (Laws, PowerLevel, TiledLaw, load_laws, power_terms, sustained_share,
                                  tiled_time_s)

LAWS_PATH = REPO / "src" / "gpuwise" / "runtime" / "kernel_laws.json"
HELD_OUT_SET = "tensor kernels: vidur GEMMs and MAMF, GPU-out"
MODERN = DATA / "kernels-modern"
HALF_BYTES = 2
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
# MAMF's NVIDIA bf16 rows whose GPU the catalog has (B300 and GB200 are not in it: left out). GH200: the
# H100 die at the 900 W the row's note gives (not in the catalog either; its datasheet peak is the H100's).
MAMF_GPUS = {"NVIDIA A100 SXM": "a100-80gb-sxm4", "NVIDIA A100 PCIe": "a100-80gb-pcie",
             "NVIDIA H100 SXM": "h100-sxm", "NVIDIA B200 SXM": "b200", "NVIDIA GH200 SXM": "gh200"}
GH200 = {"tdp": 900.0, "peak": 989.4e12}
HELD_GPU_OF = {"a100-80gb-sxm4": "a100", "a100-80gb-pcie": "a100", "h100-sxm": "h100"}  # one GPU model, one fold
MAMF_WEIGHT = math.sqrt(500)   # a MAMF ceiling weighs as much as 500 kernel rows (set before fitting)


def _specs(gpu_id: str) -> dict:
    return {**catalog_specs("h100-sxm"), **GH200} if gpu_id == "gh200" else catalog_specs(gpu_id)


def load_vidur() -> pd.DataFrame:
    d = pd.read_csv(MODERN / "vidur_mlp_ops.csv.gz")
    d = d[d.operator.isin(GEMMS)].dropna(subset=["gemm_M", "gemm_K", "gemm_N"])
    d = d.groupby(["gpu_dir", "gemm_M", "gemm_K", "gemm_N"], as_index=False)["time_ms_median"].median()
    d["gpu"] = d.gpu_dir
    for k in ("sm", "peak", "bw", "tdp"):
        d[k] = d.gpu_dir.map(lambda g, k=k: _specs(VIDUR_GPUS[g])[k])
    d["latency_s"] = d.time_ms_median * 1e-3
    return d.reset_index(drop=True)


def load_mamf() -> pd.DataFrame:
    d = pd.read_csv(MODERN / "mamf_max_achievable_matmul.csv")
    d = d[(d.dtype == "bf16") & d.accelerator_as_written.isin(list(MAMF_GPUS))].copy()
    d["gpu_id"] = d.accelerator_as_written.map(MAMF_GPUS)
    d["gpu"] = d.gpu_id.map(lambda g: HELD_GPU_OF.get(g, g))
    for k in ("peak", "tdp"):
        d[k] = d.gpu_id.map(lambda g, k=k: _specs(g)[k])
    d["share"] = d.mamf_tflops * 1e12 / d.peak
    return d.reset_index(drop=True)


def unpack(theta) -> tuple[TiledLaw, PowerLevel, float]:
    law = TiledLaw(u_max=sig(theta[0]), wave_half=math.exp(theta[1]), split_k_eff=sig(theta[2]))
    return law, PowerLevel(full_w_per_tflops=math.exp(theta[3]), exponent=sig(theta[4])), math.exp(theta[5])


THETA0 = [1.7, math.log(0.5), 1.4, math.log(1.0), -2.0, math.log(10e-6)]


def predict(law: TiledLaw, level: PowerLevel, floor_s: float, d: pd.DataFrame) -> np.ndarray:
    m, k, n = (d[c].to_numpy(float) for c in ("gemm_M", "gemm_K", "gemm_N"))
    peak, bw = d.peak.to_numpy(float), d.bw.to_numpy(float)
    issued, ratio = power_terms(level, d.tdp.to_numpy(float), peak)
    comp = tiled_time_s(law, np.ones_like(m), m, n, k, sm_count=d.sm.to_numpy(float), peak_flops_per_s=issued,
                        bandwidth_bytes_per_s=bw, elem_bytes=HALF_BYTES, power_ratio=ratio,
                        power_exponent=level.exponent)
    stream_u = load_laws().streaming["elementwise"].u_max
    operands = HALF_BYTES * (m * k + k * n + m * n) / (bw * stream_u)
    return floor_s + np.maximum(comp, operands)


def roofline(d: pd.DataFrame, floor_s: float, share: float = 1.0) -> np.ndarray:
    m, k, n = (d[c].to_numpy(float) for c in ("gemm_M", "gemm_K", "gemm_N"))
    t = np.maximum(2 * m * n * k / d.peak.to_numpy(float), HALF_BYTES * (m * k + k * n + m * n) / d.bw.to_numpy(float))
    return floor_s + t / share


def fit(v: pd.DataFrame, mamf: pd.DataFrame):
    rng = np.random.default_rng(0)
    idx = np.sort(np.concatenate([rng.choice(np.flatnonzero(v.gpu == g), min(MAX_FIT_ROWS, int((v.gpu == g).sum())),
                                             replace=False) for g in sorted(set(v.gpu))]))
    rows = v.iloc[idx]
    log_meas = np.log(rows.latency_s.to_numpy())
    log_mamf = np.log(mamf.share.to_numpy())

    def residuals(theta):
        law, level, floor = unpack(theta)
        kern = np.log(predict(law, level, floor, rows)) - log_meas
        ceiling = np.log(law.u_max * sustained_share(level, mamf.tdp.to_numpy(float), mamf.peak.to_numpy(float)))
        return np.concatenate([kern, MAMF_WEIGHT * (ceiling - log_mamf)])

    res = least_squares(residuals, np.array(THETA0), loss="soft_l1", f_scale=ROBUST_SCALE, diff_step=1e-4,
                        max_nfev=300)
    return unpack(res.x)


def _four(values) -> dict:
    return {k: float(f"{x:.4g}") for k, x in vars(values).items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ship", action="store_true",
                    help='also write "tensor" and levels["tensor"] into src/gpuwise/runtime/kernel_laws.json')
    args = ap.parse_args(argv)
    t0 = time.time()
    v, mamf = load_vidur(), load_mamf()
    lines_fold, lines_mamf, cases = [], [], []
    for held in sorted(set(v.gpu)):
        law, level, floor = fit(v[v.gpu != held], mamf[mamf.gpu != held])
        d = v[v.gpu == held]
        pred, meas = predict(law, level, floor, d), d.latency_s.to_numpy()
        roof, roof75 = roofline(d, floor), roofline(d, floor, 0.75)
        mine = [Case(f"{held}:{m:.0f}x{k:.0f}x{n:.0f}", HELD_OUT_SET, "held-out", float(p), float(t), "s",
                     {ROOFLINE: float(a), ROOFLINE_075: float(b)})
                for m, k, n, p, t, a, b in zip(d.gemm_M, d.gemm_K, d.gemm_N, pred, meas, roof, roof75)]
        cases += mine
        lines_fold.append(_row(held, mine))
        print(held, law, level, floor, summarize(relative_error(pred, meas)).cell(), flush=True)
    lines_fold.append(_row("**all**", cases))
    mamf_cases = []
    for i, row in mamf.iterrows():
        others = mamf.index != i
        vg = HELD_GPU_OF.get(row.gpu_id, row.gpu_id)
        law, level, _ = fit(v[v.gpu != vg], mamf[others & (mamf.gpu != row.gpu)])
        pred = law.u_max * float(sustained_share(level, row.tdp, row.peak))
        mamf_cases.append(Case(row.accelerator_as_written, HELD_OUT_SET, "held-out", pred, float(row.share),
                               "share of peak", {"datasheet peak (1.00)": 1.0, "0.75 of the peak": 0.75}))
        lines_mamf.append(f"| {row.accelerator_as_written} | {row.tdp / (row.peak / 1e12):.2f} | {row.share:.3f} | "
                          f"{pred:.3f} | {relative_error(pred, row.share):+.1%} | "
                          f"{relative_error(0.75, row.share):+.1%} |")
    record_scoring(HELD_OUT_SET)
    law, level, floor = fit(v, mamf)
    doc = json.loads(LAWS_PATH.read_text())
    fitted = {"tensor": {"linear": _four(law)}, "level": _four(level)}
    shipped = {"tensor": doc.get("tensor", {}), "level": doc.get("levels", {}).get("tensor")}
    if args.ship:
        doc["tensor"] = fitted["tensor"]
        doc.setdefault("levels", {})["tensor"] = fitted["level"]
        Laws.from_dict(doc)   # still a valid file
        LAWS_PATH.write_text(json.dumps(doc, indent=2) + "\n")
        shipped_line = "Written to `src/gpuwise/runtime/kernel_laws.json` by this run (`--ship`)."
    elif fitted == shipped:
        shipped_line = "The fit on everything reproduces the shipped tensor law and level (`kernel_laws.json`) to 4 significant figures."
    else:
        shipped_line = ("**The fit on everything does not reproduce the shipped tensor law and level** to 4 significant "
                        f"figures: shipped {shipped['tensor'].get('linear')}, level {shipped['level']}. The shipped file "
                        "is not rewritten without `--ship`.")
    mamf_errors = [c.error for c in mamf_cases]
    out = [
        "# Tensor-core GEMM law: error on held-out GPUs", "",
        f"Script: `benchmarks/tensor_laws.py` ({time.time() - t0:.0f} s on this machine, {os.cpu_count()} cores). "
        "Data: `kernels-modern/vidur_mlp_ops.csv.gz` (fp16 projections, unique shapes, median of vidur's timings) "
        "and `mamf_max_achievable_matmul.csv` (bf16). Protocol: `benchmarks/README.md` (fourth session) and the "
        f"script's docstring ({scored_words(HELD_OUT_SET)}).", "",
        f"Error = predicted / measured - 1; cells: {CELL_HEADER}. Baselines: the roofline (fp16 datasheet peak, "
        "bandwidth) and roofline / 0.75, each plus the fold's fitted fixed cost.", "",
        "## vidur's GEMMs, GPU held out", "", f"| held-out GPU | n | gpuwise | {ROOFLINE} | {ROOFLINE_075} |",
        "|---|---|---|---|---|", *lines_fold, "", verdict(cases, ROOFLINE_075), "",
        "## MAMF ceilings, GPU held out (share of the datasheet bf16 peak)", "",
        f"gpuwise {summarize(mamf_errors).cell()}; the baseline 0.75 of the peak "
        f"{summarize_cases_of(mamf_cases, '0.75 of the peak')}; the datasheet peak "
        f"{summarize_cases_of(mamf_cases, 'datasheet peak (1.00)')}.", "",
        verdict(mamf_cases, "0.75 of the peak"), "",
        "| GPU | TDP W per peak TFLOPS | measured | predicted | error | 0.75 of the peak: error |",
        "|---|---|---|---|---|---|", *lines_mamf, "",
        "## Shipped (fit on everything)", "",
        f"- law: u_max {law.u_max:.4g}, wave_half {law.wave_half:.4g}, split_k_eff {law.split_k_eff:.4g}",
        f"- tensor power level: full at {level.full_w_per_tflops:.4g} W per peak TFLOPS, exponent {level.exponent:.4g}",
        f"- fixed cost of a timed call: {floor * 1e6:.1f} us (vidur's timer; not part of the law)", "", shipped_line, "",
    ]
    write_results("tensor_laws", out, {
        "set": HELD_OUT_SET, "vidur_held_out": {g: _summaries([c for c in cases if c.id.startswith(f"{g}:")])
                                                for g in sorted(set(v.gpu))},
        "vidur_all": _summaries(cases), "mamf_cases": mamf_cases, "fitted": fitted, "shipped": shipped,
        "reproduces_shipped": fitted == shipped, "shipped_by_this_run": args.ship, "fixed_cost_s": floor})
    print("\n".join(out))


def summarize_cases_of(cases: list[Case], baseline: str) -> str:
    return summarize_cases(cases, baseline).cell()


def _summaries(cases: list[Case]) -> dict:
    return {"gpuwise": summarize_cases(cases), **{b: summarize_cases(cases, b) for b in (ROOFLINE, ROOFLINE_075)}}


def _row(label: str, cases: list[Case]) -> str:
    return comparison_row(label, cases, (ROOFLINE, ROOFLINE_075))


if __name__ == "__main__":
    main()
