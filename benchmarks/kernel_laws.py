"""Fit the per-kernel laws (gpuwise.runtime.laws) on NeuSight's kernel timings; score held-out GPUs.

    python -m benchmarks.kernel_laws          # writes benchmarks/results/time_kernels.md (+ .json)
    python -m benchmarks.kernel_laws --ship   # and the tiled and streaming laws of
                                              # src/gpuwise/runtime/kernel_laws.json, which gpuwise uses

``make bench`` fits and scores without ``--ship``: the shipped laws change only when someone decides to
(a model change, committed with its end-to-end re-score), and the results file says whether the fit
on all GPUs reproduces them.

Protocol (benchmarks/README.md): for each GPU, the laws are fitted on the others and scored on every
row of the held-out one (NeuSight's per-kernel figure); the shipped file is the fit on all of them.
Data: shared/data/public-benchmarks/kernels/ (fp32, PyTorch 2.1, CUDA-event latency of a lone call:
P4, P100, T4, V100, A100) and, for linear and bmm, NeuSight's held-out shapes
(kernels-modern/neusight_test_kernels.csv.gz, which adds the H100). Each class is fitted by robust
least squares (soft L1, scale 0.2, chosen before any score) on the log of the latency; at most 4000
rows per GPU and class enter a fit (fixed seed), all rows are scored. GPU features come from the
data's own device files (SMs, fp32 peak, bandwidth). Baselines on the same rows, the call floor known
as for the laws: floor + max(FLOPs / peak, bytes / bandwidth) and floor + that kernel time / 0.75.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import pandas as pd

from benchmarks.harness import (CELL_HEADER, DATA, REPO, ROOFLINE, ROOFLINE_075, Case, record_scoring,
                                relative_error, scored_words, summarize, verdict, write_results)
from benchmarks.kernel_fit import MAX_FIT_ROWS, robust_least_squares, sig
from gpuwise.catalog.model import fp32_issue_lanes, process_nm_of
from gpuwise.runtime.laws import (BASE_FP32_LANES_PER_SM, STREAMING, TILED, Laws, PowerLevel, StreamingLaw,
                                  TiledLaw, power_share, power_terms, streaming_time_s, tiled_time_s)

KERNELS = DATA / "kernels"
LAWS_PATH = REPO / "src" / "gpuwise" / "runtime" / "kernel_laws.json"
HELD_OUT_SET = "kernels: leave-one-GPU-out"
FP32_BYTES = 4
# NeuSight's op folders -> (law class, tensors read, tensors written) per element of [B, H].
STREAM_OPS = {
    "add": ("elementwise", 2, 1), "mul": ("elementwise", 2, 1), "div": ("elementwise", 2, 1),
    "pow": ("elementwise", 2, 1), "addu": ("elementwise", 1, 1), "mulu": ("elementwise", 1, 1),
    "divu": ("elementwise", 1, 1), "powu": ("elementwise", 1, 1), "relu": ("elementwise", 1, 1),
    "gelu": ("elementwise", 1, 1), "tanh": ("elementwise", 1, 1),
    "ln": ("norm", 1, 1),            # vectorized_layer_norm_kernel: the row stays in registers
    "softmax": ("softmax", 1, 1),    # softmax_warp_forward / block softmax with the row cached
}


@dataclass
class Rows:
    """Rows of one law class: shapes, the GPU's features and the measured latency."""

    gpu: np.ndarray
    latency_s: np.ndarray
    floor_s: np.ndarray         # the machine's lone-call cost: the fastest call of the folder on that GPU
    folder: np.ndarray
    sm: np.ndarray
    peak: np.ndarray
    bw: np.ndarray
    dims: dict
    tdp: np.ndarray
    lanes: np.ndarray           # FP32 lanes per SM
    node: np.ndarray            # process node, nm
    heat_held: np.ndarray       # the row's file is heat-held (heat_held_files): scored, never fitted


def devices() -> dict[str, dict]:
    out = {}
    for f in sorted((KERNELS / "devices").glob("*.json")):
        d = json.loads(f.read_text())
        out[f.stem] = {"sm": d["Num_Sm"], "peak": d["SingleFLOPs"] * 1e9, "bw": d["Mem_Bw"] * 1e9,
                       "name": d["Device"]}
    # The conv folder ran on an A100 80GB PCIe (1935 GB/s; same SMs, clock and fp32 peak).
    out["NVIDIA_A100_80GB_PCIe"] = {**out["NVIDIA_A100-PCIE-40GB"], "bw": 1935e9, "name": "NVIDIA A100 80GB PCIe"}
    # The modern file's H100 (NVIDIA H100 80GB HBM3: the SXM5 part; the catalog's h100-sxm datasheet figures).
    out["NVIDIA_H100_80GB_HBM3"] = {"sm": 132, "peak": 67e12, "bw": 3350e9, "name": "NVIDIA H100 80GB HBM3"}
    for stem, d in out.items():
        d["tdp"] = TDP_W[stem]
        d["node"] = process_nm_of(*CHIP[stem])
        d["lanes"] = fp32_issue_lanes(CHIP[stem][1])   # the catalog's rule (the P4's file says 64 of its 128)
    return out


# Board power (W) of the kernel data's GPUs: gpu_datasheets.csv (T4 70, V100 PCIe 250, A100 PCIe 40GB 250,
# 80GB 300, H100 SXM5 700), the catalog (P100 PCIe 250) and NVIDIA's Tesla P4 datasheet (75 W).
TDP_W = {"Tesla_P4": 75.0, "Tesla_P100-PCIE-16GB": 250.0, "Tesla_T4": 70.0, "Tesla_V100-PCIE-32GB": 250.0,
         "NVIDIA_A100-PCIE-40GB": 250.0, "NVIDIA_A100_80GB_PCIe": 300.0, "NVIDIA_H100_80GB_HBM3": 700.0}
# Architecture and compute capability of the kernel data's GPUs (NVIDIA's datasheets), for the catalog's one
# rule of process nodes (catalog.model.process_nm_of): the P4 is a GP104, not in the catalog.
CHIP = {"Tesla_P4": ("pascal", "6.1"), "Tesla_P100-PCIE-16GB": ("pascal", "6.0"), "Tesla_T4": ("turing", "7.5"),
        "Tesla_V100-PCIE-32GB": ("volta", "7.0"), "NVIDIA_A100-PCIE-40GB": ("ampere", "8.0"),
        "NVIDIA_A100_80GB_PCIe": ("ampere", "8.0"), "NVIDIA_H100_80GB_HBM3": ("hopper", "9.0")}
MODERN = DATA / "kernels-modern" / "neusight_test_kernels.csv.gz"
MODERN_FOLDER = {"linear": "linear-test", "bmm": "bmm-test"}    # the held-out shapes, kept apart in reports


def _modern(cls: str, dev: dict) -> pd.DataFrame | None:
    """NeuSight's held-out shapes of ``cls`` in the training files' columns (linear and bmm only)."""
    if cls not in MODERN_FOLDER:
        return None
    d = pd.read_csv(MODERN)
    d = d[d.operator == cls].copy()
    stems = d.gpu.str.replace(" ", "_")
    d["gpu"] = stems.map(gpu_of)
    for k in ("sm", "peak", "bw", "tdp", "lanes", "node"):
        d[k] = stems.map(lambda st, k=k: dev[st][k])
    d["folder"] = MODERN_FOLDER[cls]
    d["B"] = d.B.fillna(1)
    return d.rename(columns={"latency_ms": "Latency"})[["B", "M", "N", "K", "Latency", "gpu", "sm", "peak", "bw",
                                                         "tdp", "lanes", "node", "folder"]]


def gpu_of(stem: str) -> str:
    """One name per GPU model (the A100 40GB and 80GB PCIe folders are one held-out GPU: 'A100')."""
    return "A100" if "A100" in stem else "H100" if "H100" in stem else stem.replace("Tesla_", "").split("-")[0]


def load(cls: str, *, modern: bool = True) -> Rows:
    """Every row of ``cls``: the kernel data's five GPUs and, with ``modern``, NeuSight's held-out
    shapes (linear and bmm; they add the H100)."""
    dev = devices()
    frames = []
    folders = [cls] if cls in TILED else [op for op, (c, _, _) in STREAM_OPS.items() if c == cls]
    for folder in folders:
        for f in sorted((KERNELS / folder).glob("*.csv.gz")):
            d = pd.read_csv(f)
            stem = f.name.removesuffix(".csv.gz")
            d["gpu"] = gpu_of(stem)
            for k in ("sm", "peak", "bw", "tdp", "lanes", "node"):
                d[k] = dev[stem][k]
            d["folder"] = folder
            frames.append(d)
    extra = _modern(cls, dev) if modern else None
    if extra is not None:
        frames.append(extra)
    d = pd.concat(frames, ignore_index=True)
    lat = d["Latency"].to_numpy() * 1e-3
    floor = d.groupby(["gpu", "folder"])["Latency"].transform("min").to_numpy() * 1e-3
    if cls == "linear":      # nn.Linear(N, K) on [B, M, N]: (B M) x N @ N x K
        dims = {"batch": np.ones(len(d)), "m": (d.B * d.M).to_numpy(float), "n": d.K.to_numpy(float),
                "k": d.N.to_numpy(float)}
        dims["bytes"] = FP32_BYTES * (dims["m"] * dims["k"] + dims["k"] * dims["n"] + dims["m"] * dims["n"])
    elif cls == "bmm":       # [B, M, N] @ [B, N, K]
        dims = {"batch": d.B.to_numpy(float), "m": d.M.to_numpy(float), "n": d.K.to_numpy(float),
                "k": d.N.to_numpy(float)}
        dims["bytes"] = FP32_BYTES * dims["batch"] * (dims["m"] * dims["k"] + dims["k"] * dims["n"]
                                                     + dims["m"] * dims["n"])
    elif cls == "conv":      # implicit GEMM: (B Ho Wo) x (Cin k k) @ (Cin k k) x Cout
        ks, s = d.Kernel_Szie.to_numpy(float), d.Input_Size.to_numpy(float)
        ho = (s + 2 * d.Padding.to_numpy(float) - ks) // d.Stride.to_numpy(float) + 1
        cin, cout, b = d.Input_Channel.to_numpy(float), d.Output_Channel.to_numpy(float), d.B.to_numpy(float)
        dims = {"batch": np.ones(len(d)), "m": b * ho * ho, "n": cout, "k": cin * ks * ks}
        dims["bytes"] = FP32_BYTES * (b * cin * s * s + cout * cin * ks * ks + b * cout * ho * ho)
        dims.update(kernel=ks, stride=d.Stride.to_numpy(float))
    else:
        n = (d.B * d.H).to_numpy(float)
        tensors = d.folder.map(lambda op: sum(STREAM_OPS[op][1:])).to_numpy(float)
        extra = np.where(d.folder == "ln", 2 * d.H + 2 * d.B, 0).astype(float)   # weight, bias; mean, rstd
        dims = {"bytes": FP32_BYTES * (n * tensors + extra), "rows": d.B.to_numpy(float), "cols": d.H.to_numpy(float)}
    r = Rows(d.gpu.to_numpy(), lat, floor, d.folder.to_numpy(), d.sm.to_numpy(float), d.peak.to_numpy(float),
             d.bw.to_numpy(float), dims, d.tdp.to_numpy(float), d.lanes.to_numpy(float), d.node.to_numpy(float),
             np.zeros(len(d), dtype=bool))
    if cls in TILED:
        held = heat_held_files(r)
        r.heat_held = np.array([(g, f) in held for g, f in zip(r.gpu, r.folder)], dtype=bool)
    return r


# Heat-held files (benchmarks/README.md, sixteenth session): a file of dense kernels whose achieved rate falls as
# the work grows was measured on a card its chassis could not cool (a clock lowered over seconds of sustained
# load); no spec predicts it, so it enters no fit. Bins of log10 GFLOP from 1 GFLOP (below it kernels ramp).
HEAT_BINS_LOG10_GFLOP = (0.0, 1.0, 1.5, 2.0, 2.5, 3.0, math.inf)
HEAT_MIN_BIN_ROWS = 20
HEAT_HELD_RATIO = 0.7     # largest-work bin's median share below this x the best bin's: heat-held


def file_bin_shares(r: Rows) -> dict[tuple[str, str], list[float]]:
    """Each (GPU, folder) file's median achieved share of its datasheet peak per bin of work (NaN: a bin of
    fewer than ``HEAT_MIN_BIN_ROWS`` rows), for the tiled class ``r`` holds."""
    flops = 2 * r.dims["batch"] * r.dims["m"] * r.dims["n"] * r.dims["k"]
    share = flops / r.latency_s / r.peak
    bins = np.digitize(np.log10(flops / 1e9), HEAT_BINS_LOG10_GFLOP) - 1   # -1: under 1 GFLOP
    out = {}
    for key in sorted(set(zip(r.gpu, r.folder))):
        in_file = (r.gpu == key[0]) & (r.folder == key[1])
        medians = []
        for b in range(len(HEAT_BINS_LOG10_GFLOP) - 1):
            sel = in_file & (bins == b)
            medians.append(float(np.median(share[sel])) if sel.sum() >= HEAT_MIN_BIN_ROWS else math.nan)
        out[key] = medians
    return out


def heat_held_files(r: Rows) -> dict[tuple[str, str], list[float]]:
    """The heat-held files of a tiled class, with their bins: the largest-work bin's median share is below
    ``HEAT_HELD_RATIO`` x the best bin's."""
    out = {}
    for key, medians in file_bin_shares(r).items():
        filled = [m for m in medians if not math.isnan(m)]
        if len(filled) >= 2 and filled[-1] < HEAT_HELD_RATIO * max(filled):
            out[key] = medians
    return out


def law_from(cls: str, theta: np.ndarray):
    if cls in TILED:
        return TiledLaw(u_max=sig(theta[0]), l2_reuse=1 + math.exp(theta[1]), wave_half=math.exp(theta[2]),
                        split_k_eff=sig(theta[3]) if cls in SPLIT_K_CLASSES else 0.0)
    return StreamingLaw(u_max=sig(theta[0]))


# Starting point: u_max 0.85, L2 reuse 1.5 (fitted as 1 + e^theta: never below one read per DRAM byte),
# half a wave of ramp, split-K efficiency 0.8.
THETA0 = {"tiled": [1.7, math.log(0.5), math.log(0.5), 1.4], "streaming": [1.7]}
SPLIT_K_CLASSES = ("linear",)   # bmm and conv were tried with split-K: its efficiency went to 0 (never chosen)


def predict(cls: str, law, r: Rows, idx=slice(None), floor_s=None, level: PowerLevel = PowerLevel()) -> np.ndarray:
    """Latency of rows ``idx`` under ``law``: the machine's lone-call floor plus the law's time (tiled
    classes at the peak the GPU sustains under ``level``)."""
    floor = r.floor_s[idx] if floor_s is None else floor_s
    if cls in TILED:
        dm = {k: v[idx] for k, v in r.dims.items()}
        issued, ratio = power_terms(level, r.tdp[idx], r.peak[idx], lanes_per_sm=r.lanes[idx], process_nm=r.node[idx])
        comp = tiled_time_s(law, dm["batch"], dm["m"], dm["n"], dm["k"], sm_count=r.sm[idx],
                            peak_flops_per_s=issued, bandwidth_bytes_per_s=r.bw[idx], elem_bytes=FP32_BYTES,
                            power_ratio=ratio, power_exponent=level.exponent)
        return floor + np.maximum(comp, dm["bytes"] / r.bw[idx])
    return floor + streaming_time_s(law, r.dims["bytes"][idx], bandwidth_bytes_per_s=r.bw[idx])


REUSE_AT_BOUND = 1.01   # an L2 reuse this close to one read per DRAM byte is at its bound
# The CUDA-core levels (laws.PowerLevel; benchmarks/README.md, seventh session): fitted with the linear class
# in every fold and held fixed for bmm (cuBLAS SGEMM both); conv, whose cuDNN algorithms do other arithmetic
# per direct-convolution FLOP (Winograd, FFT), fits a level of its own (its u_max ran to its bound under
# linear's; the conv data has no 128-lane GPU, so its d is linear's). The fourth session fitted a power level
# from TDP per peak TFLOPS alone: its exponent ran to its bound (1) and the held-out H100 was +42% slow,
# since TDP per FLOP mixes process generations and the H100's 128-lane SMs issue less of their datasheet
# rate; the level now has both (issue width, power per FLOP by process node).
LEVEL_OF = {"linear": "cuda-core", "bmm": "cuda-core", "conv": "cuda-core-conv"}   # class -> its level
LEVEL_FITTED_WITH = {"cuda-core": "linear", "cuda-core-conv": "conv"}
# ... and jointly with (sixteenth session): bmm runs cuBLAS SGEMM as linear does; the level is the GPU's, not the
# operator's (each class keeps its own law parameters in the joint fit; bmm's law is refitted with the level fixed).
LEVEL_ALSO_FITTED_WITH = {"cuda-core": "bmm"}
# Energy of a FLOP ~ node^PROCESS_EXPONENT, from the foundry's published power at iso-speed: TSMC N7 against
# 16FF+ -60% (0.40 = (7/16)^1.11), N5 against N7 -30% (0.70 = (5/7)^1.06). Fixed, not fitted: fitted (the
# first run of 2026-12-06, with 4N taken as 4 nm) it came out 2.55 (1.3-3.0 across folds), a 4 nm FLOP at a
# quarter of a 7 nm one's energy, because the fit's only handle on it is which 12-16 nm cards are
# power-capped (benchmarks/README.md).
PROCESS_EXPONENT = 1.1
# Start: full clock from 15 W per 7 nm TFLOPS, exponent 0.5, d 0.5.
LEVEL0 = [math.log(15.0), 0.0, 0.0]
# A fold without a GPU of more than 64 lanes per SM cannot fit d: the prior (a guess, benchmarks/README.md).
SECOND_DATAPATH_PRIOR = 0.5


def level_from(theta, d_fixed: float | None = None) -> PowerLevel:
    return PowerLevel(full_w_per_tflops=math.exp(theta[0]), exponent=sig(theta[1]),
                      process_exponent=PROCESS_EXPONENT,
                      second_datapath_share=sig(theta[2]) if d_fixed is None else d_fixed)


def _fit_rows(r: Rows, train_gpus: list[str]) -> np.ndarray:
    """The rows of ``train_gpus`` that enter a fit: heat-held files left out, at most ``MAX_FIT_ROWS`` per GPU
    (seed 0)."""
    rng = np.random.default_rng(0)
    idx = []
    for g in train_gpus:
        rows = np.flatnonzero((r.gpu == g) & ~r.heat_held)
        idx.extend(rng.choice(rows, min(MAX_FIT_ROWS, len(rows)), replace=False))
    return np.sort(np.array(idx, dtype=int))


def _theta0(cls: str) -> np.ndarray:
    theta0 = np.array(THETA0["tiled" if cls in TILED else "streaming"])
    return theta0[:3] if cls in TILED and cls not in SPLIT_K_CLASSES else theta0


def fit(cls: str, r: Rows, train_gpus: list[str], *, operand_term: bool = True, level: PowerLevel | None = None,
        d_default: float = SECOND_DATAPATH_PRIOR, companion: tuple[str, Rows] | None = None,
        companion_operand_term: bool = True):
    """({class: law}, power level): robust least squares of one class on the training GPUs' rows (heat-held files
    left out). ``level`` None for a tiled class: fitted with it (``LEVEL_FITTED_WITH``) and, where given,
    jointly with the ``companion`` class's rows (its own law parameters, the same level: ``LEVEL_ALSO_FITTED_WITH``),
    its d at ``d_default`` where the training rows have no SM with a second FP32 datapath; else held fixed.
    A tiled class whose L2 reuse runs to its bound (the data asks for more operand traffic than a kernel
    without any L2 could move: the term is standing in for something else) is refitted without the operand
    term: the same rule as every other term that ran to a bound (benchmarks/README.md), applied in every fold,
    to the companion as well. The laws returned are those of every class fitted (the companion's too: its law
    is the one fitted with the level, so it is the one shipped and scored)."""
    fit_level = cls in TILED and level is None
    parts = [(cls, r, operand_term)]
    if fit_level and companion is not None:
        parts.append((*companion, companion_operand_term))
    idxs = [_fit_rows(pr, train_gpus) for _, pr, _ in parts]
    log_meas = [np.log(pr.latency_s[ix]) for (_, pr, _), ix in zip(parts, idxs)]
    starts = [_theta0(c) for c, _, _ in parts]
    cuts = np.cumsum([0, *(len(t) for t in starts)])
    # d is fitted only where the training rows have an SM with a second FP32 datapath
    d_fixed = None if any((pr.lanes[ix] > BASE_FP32_LANES_PER_SM).any() for (_, pr, _), ix in zip(parts, idxs)) \
        else d_default
    theta0 = np.concatenate([*starts, (LEVEL0 if d_fixed is None else LEVEL0[:2]) if fit_level else []])

    def law(theta, p: int):
        c, _, with_operands = parts[p]
        out = law_from(c, theta[cuts[p]:cuts[p + 1]])
        return out if with_operands or c not in TILED else replace(out, l2_reuse=0.0)

    def lvl(theta):
        return level_from(theta[cuts[-1]:], d_fixed) if fit_level else (level or PowerLevel())

    def residuals(theta):
        lv = lvl(theta)
        return np.concatenate([np.log(predict(c, law(theta, p), pr, ix, level=lv)) - lm
                               for p, ((c, pr, _), ix, lm) in enumerate(zip(parts, idxs, log_meas))])

    res = robust_least_squares(residuals, theta0)
    fitted = [law(res.x, p) for p in range(len(parts))]
    at_bound = [c in TILED and with_operands and f.l2_reuse < REUSE_AT_BOUND
                for (c, _, with_operands), f in zip(parts, fitted)]
    if any(at_bound):
        return fit(cls, r, train_gpus, operand_term=operand_term and not at_bound[0], level=level,
                   d_default=d_default, companion=companion,
                   companion_operand_term=companion_operand_term and not (len(at_bound) > 1 and at_bound[1]))
    return {c: f for (c, _, _), f in zip(parts, fitted)}, lvl(res.x)


def roofline(cls: str, r: Rows, idx, share: float = 1.0) -> np.ndarray:
    """The baseline on the same rows: the machine floor + max(FLOPs / datasheet peak, bytes / bandwidth),
    the kernel part divided by ``share`` (0.75: the one-constant baseline)."""
    dm = {k: v[idx] for k, v in r.dims.items()}
    t = dm["bytes"] / r.bw[idx]
    if cls in TILED:
        t = np.maximum(t, 2 * dm["batch"] * dm["m"] * dm["n"] * dm["k"] / r.peak[idx])
    return r.floor_s[idx] + t / share


def _train_floor(r: Rows, held_mask: np.ndarray) -> np.ndarray:
    """The lone-call floor of each held-out row as the other GPUs' mean floor for its operator."""
    out = np.empty(held_mask.sum())
    folders = r.folder[held_mask]
    for f in set(folders):
        others = (~held_mask) & (r.folder == f)
        out[folders == f] = np.mean(np.unique(r.floor_s[others]))
    return out


BASELINES = (ROOFLINE, ROOFLINE_075)
COLUMNS = ("model", "strict", *BASELINES)     # what each fold predicts for its held-out rows


def _errors(fold: dict, key: str) -> np.ndarray:
    return relative_error(fold[key], fold["measured"])


def _cell(fold: dict | None, key: str = "model") -> str:
    return summarize(_errors(fold, key)).cell() if fold is not None else "-"


def _pool(folds: list[dict]) -> dict:
    """One fold of the rows of several: every column concatenated."""
    return {k: np.concatenate([f[k] for f in folds]) for k in folds[0]}


def _cool(fold: dict) -> dict:
    """The fold's rows outside heat-held files."""
    keep = ~fold["heat_held"]
    return {k: v[keep] for k, v in fold.items()}


def _verdict(fold: dict, model: str) -> str:
    """harness.verdict on these rows: the laws against roofline / 0.75."""
    cases = [Case(str(i), HELD_OUT_SET, "held-out", float(p), float(m), "s", {ROOFLINE_075: float(b)})
             for i, (p, m, b) in enumerate(zip(fold["model"], fold["measured"], fold[ROOFLINE_075]))]
    return verdict(cases, ROOFLINE_075, model)


def _rounded(laws: Laws) -> dict:
    d = laws.to_dict()
    for group in ("tiled", "streaming", "tensor", "levels"):
        for v in d[group].values():
            for k in v:
                v[k] = float(f"{v[k]:.4g}")
    return d


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ship", action="store_true", help="also write the laws into src/gpuwise/runtime/kernel_laws.json")
    args = ap.parse_args(argv)
    t0 = time.time()
    tiled, streaming = {}, {}
    by_gpu: dict[str, list[dict]] = {}        # held-out GPU -> its folds, one per class
    modern: dict[str, dict[str, dict]] = {}   # class -> held-out GPU -> its fold's rows of the held-out shapes
    per_class = {}                            # class -> ({held-out GPU: fold}, in-sample errors, shipped-form law)
    fold_levels: dict[str, dict[str, PowerLevel]] = {}    # level -> held-out GPU -> its fold's level
    shipped_levels: dict[str, PowerLevel] = {}
    loaded: dict[str, Rows] = {}
    joint: dict[tuple[str, str | None], TiledLaw] = {}   # (class, held-out GPU) -> law fitted with a level's class
    heat: dict[str, dict] = {}                # tiled class -> its heat-held files and their bins

    def rows_of(cls: str) -> Rows:
        if cls not in loaded:
            loaded[cls] = load(cls)
        return loaded[cls]

    def level_args(cls: str, held: str | None) -> dict:
        """fit()'s level arguments for ``cls`` in the fold without ``held`` (None: the fit on all GPUs)."""
        name = LEVEL_OF.get(cls)
        if name is None:
            return {}
        done = shipped_levels if held is None else fold_levels.get(name, {})
        if LEVEL_FITTED_WITH[name] != cls:
            return {"level": (done.get(held) if held is not None else done.get(name)) or PowerLevel()}
        core = shipped_levels.get("cuda-core") if held is None else fold_levels.get("cuda-core", {}).get(held)
        also = LEVEL_ALSO_FITTED_WITH.get(name)
        return {"level": None, "d_default": core.second_datapath_share if core else SECOND_DATAPATH_PRIOR,
                "companion": (also, rows_of(also)) if also else None}

    def keep_level(cls: str, held: str | None, level: PowerLevel) -> None:
        name = LEVEL_OF.get(cls)
        if name is not None and LEVEL_FITTED_WITH[name] == cls:
            if held is None:
                shipped_levels[name] = level
            else:
                fold_levels.setdefault(name, {})[held] = level

    def fit_once(cls: str, r: Rows, train: list[str], held: str | None):
        """(law, level) of ``cls`` in the fold without ``held``: a class fitted jointly with a level's class
        (``LEVEL_ALSO_FITTED_WITH``) takes the law of that joint fit, with its level; any other is fitted."""
        if (cls, held) in joint:
            args = level_args(cls, held)
            return joint.pop((cls, held)), args.get("level", PowerLevel())
        laws, level = fit(cls, r, train, **level_args(cls, held))
        keep_level(cls, held, level)
        for other, law in laws.items():
            if other != cls:
                joint[(other, held)] = law
        return laws[cls], level

    for cls in (*TILED, *STREAMING):
        r = rows_of(cls)
        gpus = sorted(set(r.gpu))
        folds = {}
        for held in gpus:
            train = [g for g in gpus if g != held]
            law, level = fit_once(cls, r, train, held)
            mask = r.gpu == held
            fold = {"model": predict(cls, law, r, mask, level=level),
                    "strict": predict(cls, law, r, mask, floor_s=_train_floor(r, mask), level=level),
                    ROOFLINE: roofline(cls, r, mask), ROOFLINE_075: roofline(cls, r, mask, 0.75),
                    "measured": r.latency_s[mask], "heat_held": r.heat_held[mask]}
            folds[held] = fold
            by_gpu.setdefault(held, []).append(fold)
            new = np.isin(r.folder[mask], list(MODERN_FOLDER.values()))
            if new.any():
                modern.setdefault(cls, {})[held] = {k: v[new] for k, v in fold.items()}
            print(f"{cls:12s} held out {held:10s} {_cell(fold)}; floor from the others {_cell(fold, 'strict')}; "
                  f"level {level}", flush=True)
        law, level = fit_once(cls, r, gpus, None)
        (tiled if cls in TILED else streaming)[cls] = law
        per_class[cls] = (folds, relative_error(predict(cls, law, r, level=level), r.latency_s), law)
        if cls in TILED:
            heat[cls] = heat_held_files(r)
    record_scoring(HELD_OUT_SET)
    old = Laws.from_dict(json.loads(LAWS_PATH.read_text())) if LAWS_PATH.exists() else Laws({}, {})
    today = date.today().isoformat()
    # The tensor-core laws and level are fitted by tensor_laws.py: kept as they are.
    # The per-SM limit of eager elementwise kernels is fitted by liger_speed.py --fit: kept as it is.
    laws = Laws(tiled=tiled, streaming=streaming, date=today, tensor=old.tensor,
                levels={**{k: v for k, v in old.levels.items() if k not in LEVEL_FITTED_WITH}, **shipped_levels},
                eager_bytes_per_sm_clock=old.eager_bytes_per_sm_clock,
                source=f"fitted {today} by benchmarks/kernel_laws.py on shared/data/public-benchmarks/kernels and "
                       "kernels-modern/neusight_test_kernels (NeuSight's fp32 kernel timings: P4, P100, T4, V100, A100, "
                       "H100); tensor-core laws by benchmarks/tensor_laws.py"
                       + (old.source[old.source.index("; eager_bytes_per_sm_clock"):]
                          if "; eager_bytes_per_sm_clock" in old.source else ""))
    fitted, shipped = _rounded(laws), _rounded(old)
    if args.ship:
        LAWS_PATH.write_text(json.dumps(fitted, indent=2) + "\n")
    lines, data = _write(per_class, by_gpu, modern, (shipped_levels, fold_levels), fitted, shipped, args.ship,
                         time.time() - t0, heat)
    write_results("kernel_laws", lines, data)
    print("\n".join(lines))


def _best_bins() -> dict[str, str]:
    """Each GPU's best bin median share of the datasheet peak in each of its linear files ("0.98 test, 0.87")."""
    r = load("linear")
    out: dict[str, list[str]] = {}
    for (g, folder), medians in file_bin_shares(r).items():
        filled = [m for m in medians if not math.isnan(m)]
        if filled:
            out.setdefault(g, []).append(f"{max(filled):.2f} `{folder}`")
    return {g: ", ".join(v) for g, v in out.items()}


def _bin_label(i: int) -> str:
    lo, hi = HEAT_BINS_LOG10_GFLOP[i], HEAT_BINS_LOG10_GFLOP[i + 1]
    return f">= {10 ** lo:.0f} GFLOP" if math.isinf(hi) else f"{10 ** lo:.0f}-{10 ** hi:.0f} GFLOP"


def _write(per_class, by_gpu, modern, levels, fitted, shipped, ship, secs, heat):
    gpus = sorted(by_gpu)
    lines = [
        "# Per-kernel laws: error on held-out GPUs", "",
        f"Script: `benchmarks/kernel_laws.py` ({secs:.0f} s on this machine, {os.cpu_count()} cores). Data: "
        "`shared/data/public-benchmarks/kernels/` (NeuSight's single-kernel fp32 timings on P4, P100, T4, V100, "
        "A100; PyTorch 2.1, CUDA-event latency of a lone call) and, for linear and bmm, NeuSight's held-out shapes "
        "(`kernels-modern/neusight_test_kernels.csv.gz`, which adds the H100). Protocol: `benchmarks/README.md` "
        f"(each GPU scored with the laws fitted on the others; {scored_words(HELD_OUT_SET)}).", "",
        f"Error = predicted / measured latency - 1; cells: {CELL_HEADER}.",
        "Every row is a lone timed call: latency = the machine's fixed cost of a call (launch and event timing, "
        "25-110 us here, no property of the GPU) + the kernel. Column 'machine floor': the held-out machine's "
        "fastest call of that operator is taken as known (one number per operator and machine, the way a "
        "launch-overhead measurement would give it); column 'floor from the others': the training GPUs' mean "
        f"floor instead (strict). Baselines on the same rows, the machine floor known: {ROOFLINE} (floor + "
        f"max(FLOPs / datasheet peak, bytes / bandwidth)) and {ROOFLINE_075} (the kernel part at 75% of that rate).",
        "",
        "## Summary: every kernel row of the held-out GPU", "",
        f"| held-out GPU | machine floor | floor from the others | {ROOFLINE} | {ROOFLINE_075} |", "|---|---|---|---|---|",
    ]
    pooled = {g: _pool(fs) for g, fs in by_gpu.items()}
    for g in gpus:
        lines.append(f"| {g} | " + " | ".join(_cell(pooled[g], k) for k in COLUMNS) + " |")
    everything = _pool(list(pooled.values()))
    cool = _cool(everything)
    lines += ["| **all** | " + " | ".join(_cell(everything, k) for k in COLUMNS) + " |",
              "| all, heat-held files left out | " + " | ".join(_cell(cool, k) for k in COLUMNS) + " |", "",
              _verdict(everything, "gpuwise"), "",
              "## Heat-held files (left out of every fit, scored above)", "",
              "A file (GPU x source folder) of dense kernels whose achieved rate falls as the work grows: the median "
              f"share of the datasheet fp32 peak in its largest-work bin is below {HEAT_HELD_RATIO} x its best bin's "
              "(bins of log10 GFLOP from 1 GFLOP, at least "
              f"{HEAT_MIN_BIN_ROWS} rows; benchmarks/README.md, sixteenth session). Such a card lowered its clock under "
              "sustained load (heat), which no spec predicts; its rows are scored where its GPU is held out, never fitted.",
              "", "| class | file | " + " | ".join(_bin_label(i) for i in range(len(HEAT_BINS_LOG10_GFLOP) - 1))
              + " |", "|---|---|" + "---|" * (len(HEAT_BINS_LOG10_GFLOP) - 1)]
    for cls, files in heat.items():
        for (g, folder), medians in files.items():
            lines.append(f"| {cls} | {g} `{folder}` | " + " | ".join("-" if math.isnan(m) else f"{m:.2f}" for m in medians)
                         + " |")
    if not any(heat.values()):
        lines.append("| - | none | " + " | ".join("" for _ in HEAT_BINS_LOG10_GFLOP[1:]) + " |")
    lines += ["",
              "## By class (held-out GPU, machine floor)", "",
              "| class | " + " | ".join(gpus) + f" | all held out | {ROOFLINE}, all held out | {ROOFLINE_075}, all held "
              "out | fit on all GPUs (in-sample) |", "|---|" + "---|" * (len(gpus) + 4)]
    for cls, (folds, e_all, _) in per_class.items():
        held = _pool(list(folds.values()))
        lines.append(f"| {cls} | " + " | ".join(_cell(folds.get(g)) for g in gpus) + " | "
                     + " | ".join(_cell(held, k) for k in ("model", *BASELINES)) + f" | {summarize(e_all).cell()} |")
    lines += ["", "## NeuSight's held-out shapes (kernels-modern), GPU held out (issue 28's figure)", "",
              "Each GPU's rows of `neusight_test_kernels.csv.gz`, predicted with the laws fitted without that GPU; "
              "beside them the baselines on the same rows.", "",
              f"| class | held-out GPU | gpuwise | {ROOFLINE} | {ROOFLINE_075} |", "|---|---|---|---|---|"]
    verdicts = []
    for cls, folds in modern.items():
        for g, fold in folds.items():
            lines.append(f"| {cls} | {g} | " + " | ".join(_cell(fold, k) for k in ("model", *BASELINES)) + " |")
        both = _pool(list(folds.values()))
        lines.append(f"| {cls} | **all** | " + " | ".join(_cell(both, k) for k in ("model", *BASELINES)) + " |")
        lines.append(f"| {cls} | all, heat-held files left out | "
                     + " | ".join(_cell(_cool(both), k) for k in ("model", *BASELINES)) + " |")
        verdicts.append(f"{cls}: " + _verdict(both, "gpuwise"))
    shipped_levels, fold_levels = levels
    lines += ["", *verdicts, "", "## CUDA-core levels (issue width and power; `laws.PowerLevel`)", "",
              "Fitted with the class named (`LEVEL_FITTED_WITH`; `cuda-core` jointly with bmm's rows, "
              "`LEVEL_ALSO_FITTED_WITH`: both run cuBLAS SGEMM, sixteenth session); α (`process_exponent`) fixed from the foundries' "
              "figures; in a fold without a 128-lane GPU, d is the prior (GEMMs) or the GEMM level's (conv). A "
              "parameter at its bound is marked *.", "",
              "| level | fit | full W per 7 nm TFLOPS | exponent | d (second datapath) |", "|---|---|---|---|---|"]
    for name in LEVEL_FITTED_WITH:
        for fold, lvl in [("all GPUs (shipped)", shipped_levels.get(name)),
                          *((f"without {g}", v) for g, v in sorted(fold_levels.get(name, {}).items()))]:
            if lvl is not None:
                at_bound = "*" if lvl.exponent > 0.999 else ""
                lines.append(f"| {name} | {fold} | {lvl.full_w_per_tflops:.4g} | {lvl.exponent:.4g}{at_bound} | "
                             f"{lvl.second_datapath_share:.4g} |")
    lines.append("")
    core = shipped_levels.get("cuda-core")
    if core is not None:
        u_max = fitted["tiled"]["linear"]["u_max"]
        lines += ["## A large SGEMM's share of the datasheet fp32 peak (the fit on all GPUs)", "",
                  "The linear law's `u_max` x the level's issue and power shares, on each kernel-data GPU (the "
                  "protocol's check that the level is physical; measured: each file's best bin in the heat-held "
                  "table's terms, `file_bin_shares`).", "", "| GPU | predicted | measured, best bin of its files |",
                  "|---|---|---|"]
        best = _best_bins()
        for stem, d in devices().items():
            issued, ratio = power_terms(core, d["tdp"], d["peak"], lanes_per_sm=d["lanes"], process_nm=d["node"])
            share = u_max * power_share(ratio, core.exponent) * issued / d["peak"]
            lines.append(f"| {d['name']} | {share:.2f} | {best.get(gpu_of(stem), '-')} |")
        lines.append("")
    lines += ["## The fit on all GPUs against the shipped laws", "",
              "| class | fitted by this run | " + ("before this run (`kernel_laws.json` as it was)" if ship else
                                                  "shipped (`kernel_laws.json`)") + " |", "|---|---|---|"]
    differ = []
    for group in ("tiled", "streaming"):
        for cls, params in fitted[group].items():
            old = shipped[group].get(cls, {})
            differ += [f"{cls} {k}" for k, v in params.items() if old.get(k) != v]
            lines.append(f"| {cls} | " + ", ".join(f"{k} {v:.4g}" for k, v in params.items()) + " | "
                         + (", ".join(f"{k} {v:.4g}" for k, v in old.items()) or "-") + " |")
    levels_fitted = {k: v for k, v in fitted["levels"].items() if k != "tensor"}
    levels_shipped = {k: v for k, v in shipped["levels"].items() if k != "tensor"}
    if levels_fitted != levels_shipped:
        differ.append("the CUDA-core levels")
    if ship:
        lines += ["", "Written to `src/gpuwise/runtime/kernel_laws.json` by this run (`--ship`)."]
    elif differ:
        lines += ["", f"**The fit does not reproduce the shipped laws** to 4 significant figures: {', '.join(differ)} "
                  "differ. The shipped file is not rewritten without `--ship` (a model change, re-scored end to end)."]
    else:
        lines += ["", "The fit reproduces the shipped laws to 4 significant figures."]
    lines += ["", "The floor is not part of a law: step predictions add gpuwise's per-kernel latency and host "
              "model instead.", ""]
    summaries = {
        "held_out_gpus": {g: {k: summarize(_errors(pooled[g], k)) for k in COLUMNS} for g in gpus},
        "all_held_out": {k: summarize(_errors(everything, k)) for k in COLUMNS},
        "all_held_out_without_heat_held": {k: summarize(_errors(cool, k)) for k in COLUMNS},
        "heat_held_files": {cls: {f"{g} {folder}": [None if math.isnan(m) else m for m in medians]
                                  for (g, folder), medians in files.items()}
                            for cls, files in heat.items()},
        "by_class": {cls: {"held_out": {g: summarize(_errors(f, "model")) for g, f in folds.items()},
                           "in_sample": summarize(e_all)} for cls, (folds, e_all, _) in per_class.items()},
        "modern_shapes": {cls: {g: {k: summarize(_errors(f, k)) for k in ("model", *BASELINES)} for g, f in folds.items()}
                          for cls, folds in modern.items()},
    }
    return lines, {"set": HELD_OUT_SET, "columns": list(COLUMNS), **summaries, "fitted": fitted, "shipped": shipped,
                   "reproduces_shipped": not differ, "shipped_by_this_run": ship}


if __name__ == "__main__":
    main()
