"""One decode layer as gpuwise's decode model charges it, against vidur's per-operator kernel times.

    python -m benchmarks.decode_layers     # writes benchmarks/results/decode_layers.md (+ .json)

Protocol (benchmarks/README.md, tenth session, written before the first score): vidur's fp16 layer operators
(``kernels-modern/vidur_mlp_ops.csv.gz``) at the decode batches a server runs (``num_tokens`` <= 256) on A100,
H100 and A40, every model and TP degree. **Nothing is fitted on these rows**: every row is held out.

* measured: per (GPU, model, TP, tokens) the sum of one layer's operators: both norms, the QKV, O, up and down
  GEMMs, rotary, activation and the residual adds. vidur times only the second of a layer's two residual adds
  (``GPTBlock._forward_with_post_attn_norm``): ``add`` counts twice; phi-2's parallel block times both adds as
  one expression: once. ``emb`` (once per model) is not a layer operator. The rows are kineto's kernel
  durations (vidur's default ``record_function`` method): no host time, no gap between kernels.
* predicted: ``runtime.llm.decode_step``'s share of one layer, with the product's functions and constants:
  max(``weights_read_s`` of the layer's weights, the layer's GEMMs from ``llm_kernels.decode_compute_s``) +
  (``VLLM_KERNELS_PER_LAYER`` - 1: no attention kernel) x ``kernel_latency_s``; no all-reduce, no host, no
  KV cache. The script checks that the parts reproduce ``decode_compute_s`` and ``decode_step``.
* baselines on the same rows: the roofline per operator (max(bytes / bandwidth, FLOPs / fp16 peak), summed,
  no gaps) and roofline / 0.75.

The tensor-core GEMM law was fitted on vidur's GEMMs, these rows' included (``tensor_laws.py``): where the
arithmetic term wins the prediction is in sample; the results say on how many rows.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import pandas as pd

from benchmarks.harness import (CELL_HEADER, DATA, ROOFLINE, ROOFLINE_075, Case, comparison_row, record_scoring,
                                scored_words, summarize_cases, verdict, write_results)
from benchmarks.kernel_fit import VIDUR_GPUS
from gpuwise.catalog import load_catalog
from gpuwise.memory.llm import inference_weight_bytes
from gpuwise.runtime import llm_kernels
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.llm import (VLLM_KERNELS_PER_LAYER, decode_kernels, decode_step, unread_embedding_bytes,
                                 weights_read_s)
from gpuwise.runtime.llm_kernels import decode_compute_s
from gpuwise.runtime.llm_streams import split
from gpuwise.runtime.rates import rate_peak_flops_per_s
from gpuwise.workload import Workload
from gpuwise.workload.decoder import DecoderArch, arch_from_config
from gpuwise.workload.storage import frozen_bytes

HELD_OUT_SET = "decode layers: vidur, decode-sized rows"
MAX_TOKENS = 256            # vLLM's default max_num_seqs: a pure decode batch has at most 256 tokens
BANDS = (("1", 1, 1), ("2-16", 2, 16), ("17-64", 17, 64), ("65-256", 65, 256))
PRECISION = "fp16"
HALF = 2
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
NORMS = ("input_layernorm", "post_attention_layernorm")
OTHERS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
# vidur's model configs (vidur/config/model_config.py) as the HF model types gpuwise builds: Llama's layer for
# Llama-2/3, CodeLlama and InternLM-20B (no biases), Qwen2's (q/k/v bias) for Qwen-72B, phi's for phi-2
MODEL_TYPE = {"Qwen/Qwen-72B": "qwen2", "microsoft/phi-2": "phi"}
SXM = "a100-80gb-sxm4"      # the A100 the brief named; VIDUR_GPUS (the tensor law's fit) reads it as the PCIe card
VIDUR_KERNELS = "gpuwise, vidur's kernel count"
AS_SXM = "gpuwise, A100 as SXM4"
MODEL = "gpuwise"


def load() -> pd.DataFrame:
    """One row per (gpu, model, tp, tokens, operator) at <= MAX_TOKENS tokens: the median of duplicate rows."""
    d = pd.read_csv(DATA / "kernels-modern" / "vidur_mlp_ops.csv.gz")
    d = d[(d.num_tokens <= MAX_TOKENS) & (d.operator != "emb")]
    keys = ["gpu_dir", "model", "tp", "num_tokens", "operator"]
    return d.groupby(keys, as_index=False).agg(ms=("time_ms_median", "median"), m=("gemm_M", "first"),
                                                k=("gemm_K", "first"), n=("gemm_N", "first"))


def shapes() -> pd.DataFrame:
    return pd.read_csv(DATA / "kernels-modern" / "vidur_model_shapes.csv").set_index("model")


def one_layer_arch(model: str, s) -> DecoderArch:
    cfg = {"model_type": MODEL_TYPE.get(model, "llama"), "hidden_size": int(s.n_embd), "num_hidden_layers": 1,
           "num_attention_heads": int(s.n_head), "num_key_value_heads": int(s.n_kv_head),
           "intermediate_size": int(s.n_expanded_embd), "vocab_size": int(s.vocab_size), "tie_word_embeddings": False}
    arch = arch_from_config(cfg)
    assert arch.gated_mlp == bool(s.gated_mlp), model
    return arch


def post_attn_norm(arch: DecoderArch) -> bool:
    """vidur's ``post_attn_norm``: a second norm and a second (untimed) residual add; phi-2's block has neither."""
    return arch.norms_per_layer == 2


def workload(tp: int, batch: int) -> Workload:
    return Workload("vidur-layer", mode="infer", precision=PRECISION, engine="vllm", batch_size=batch, num_gpus=tp)


@dataclass(frozen=True)
class Layer:
    mem_s: float            # the layer's weights at DECODE_BW_EFF of the datasheet bandwidth
    flop_s: float           # the layer's GEMMs at the tensor-core law
    gap_s: float            # kernel_latency_s
    layer_bytes: float

    def time_s(self, kernels: int) -> float:
        return max(self.mem_s, self.flop_s) + kernels * self.gap_s


def predict(arch: DecoderArch, gpu, tp: int, tokens: int, cal) -> Layer:
    """decode_step's share of one layer (no attention, no KV cache, no all-reduce), from the product's parts."""
    w = workload(tp, tokens)
    pc = arch.param_counts()
    norm_w = 2 * arch.hidden_size if arch.layernorm else arch.hidden_size
    outside = (pc.embedding + pc.lm_head + norm_w) * frozen_bytes(PRECISION)        # not a layer's weights
    layer_bytes = (inference_weight_bytes(arch, w) - outside) / tp
    sh = llm_kernels._shape(arch, w, gpu, cal, tokens, 1, tp)
    layer_gemms = llm_kernels._layers_gemms(sh, forward=True, dgrad=False, wgrad=False, lora=None, latency=False,
                                            expert_share=None).total_s
    head = llm_kernels._gemms(sh, tokens, sh.h, split(arch.vocab_size, tp), forward=True, dgrad=False, wgrad=False,
                              latency=False)
    whole = decode_compute_s(arch, w, gpu, cal, context_tokens=0, batch=tokens, tp=tp)
    assert math.isclose(layer_gemms + head, whole, rel_tol=1e-12), (layer_gemms, head, whole)
    layer = Layer(weights_read_s(layer_bytes, gpu), layer_gemms, cal.p("kernel_latency_s"), layer_bytes)
    if tp == 1:     # the same parts, with the head and decode_kernels' count, are decode_step's GPU time
        head_bytes = (pc.lm_head + norm_w) * frozen_bytes(PRECISION)
        table_bytes = pc.embedding * frozen_bytes(PRECISION)     # an untied table: only the tokens' rows are read
        step = decode_step(arch, w, gpu, weights_bytes=layer_bytes + head_bytes + table_bytes, context_tokens=0,
                           batch=tokens, kv_bytes_per_element=HALF, calibration=cal)
        read = layer_bytes + head_bytes + table_bytes - unread_embedding_bytes(arch, w, tokens)
        expect = (max(weights_read_s(read, gpu), whole)
                  + decode_kernels(arch, "vllm") * layer.gap_s)
        assert math.isclose(step.gpu_s, expect, rel_tol=1e-12), (step.gpu_s, expect)
    return layer


def check_gemm_shapes(ops: dict, arch: DecoderArch, tp: int, tokens: int) -> None:
    """vidur's (M, K, N) of each GEMM are the 1-layer arch's shards: the shapes gpuwise times are vidur's."""
    h, hd, inter = arch.hidden_size, arch.head_dim, arch.intermediate_size
    q, kv = arch.num_heads * hd // tp, arch.num_kv_heads * hd // tp
    expect = {"attn_pre_proj": (h, q + 2 * kv), "attn_post_proj": (q, h),
              "mlp_up_proj": (h, (2 if arch.gated_mlp else 1) * inter // tp), "mlp_down_proj": (inter // tp, h)}
    for op, (k, n) in expect.items():
        row = ops[op]
        assert (row.m, row.k, row.n) == (tokens, k, n), (op, tp, tokens, (row.m, row.k, row.n), (tokens, k, n))


def roofline_s(ops: dict, arch: DecoderArch, tp: int, tokens: int, bw: float, peak: float, adds: int) -> float:
    """Per measured operator max(bytes / bandwidth, FLOPs / peak), summed; ``adds``: how often ``add`` counts."""
    t, h = float(tokens), float(arch.hidden_size)
    inter = arch.intermediate_size / tp
    hd = arch.head_dim
    q = t * arch.num_heads / tp * hd
    k = t * max(1.0, arch.num_kv_heads / tp) * hd
    three_way = not post_attn_norm(arch)                # phi-2: attn + mlp + residual, two add kernels
    elems = {"input_layernorm": 2 * t * h, "post_attention_layernorm": 2 * t * h,
             "add": 3 * t * h * (2 if three_way else 1),
             "mlp_act": 3 * t * inter if arch.gated_mlp else 2 * t * inter, "attn_rope": 2 * (q + k)}
    total = 0.0
    for op, row in ops.items():
        if op in GEMMS:
            m, kk, n = row.m, row.k, row.n
            total += max(HALF * (m * kk + kk * n + m * n) / bw, 2 * m * kk * n / peak)
        else:
            total += HALF * elems[op] / bw * (adds if op == "add" else 1)
    return total


def band_of(tokens: int) -> str:
    return next(name for name, lo, hi in BANDS if lo <= tokens <= hi)


def main() -> None:
    t0 = time.time()
    d = load()
    sh = shapes()
    cal = load_calibration()
    gpus = {g.id: g for g in load_catalog(user_file=False).gpus}
    archs = {m: one_layer_arch(m, sh.loc[m]) for m in sorted(set(d.model))}
    cases, sxm_cases, rows, dropped = [], [], [], []
    for (gdir, model, tp, tokens), grp in d.groupby(["gpu_dir", "model", "tp", "num_tokens"]):
        tp, tokens = int(tp), int(tokens)
        arch = archs[model]
        post = post_attn_norm(arch)
        need = set(GEMMS) | {"input_layernorm", "attn_rope", "mlp_act", "add"} | ({"post_attention_layernorm"}
                                                                                   if post else set())
        ops = {r.operator: r for r in grp.itertuples()}
        if not need <= set(ops):
            dropped.append(f"{gdir}:{model}:tp{tp}:{tokens} lacks {sorted(need - set(ops))}")
            continue
        ops = {op: ops[op] for op in sorted(need)}
        check_gemm_shapes(ops, arch, tp, tokens)
        adds = 2 if post else 1
        measured = sum(r.ms * (adds if op == "add" else 1) for op, r in ops.items()) * 1e-3
        gemm_ms = sum(ops[op].ms for op in GEMMS) * 1e-3
        other_kernels = len(need - set(GEMMS)) - 1 + 2      # the norms, rotary, activation + two add kernels
        vidur_kernels = len(GEMMS) + other_kernels          # 10 a layer (phi-2: 9)
        gpu = gpus[VIDUR_GPUS[gdir]]
        bw, peak = gpu.memory_bandwidth_gbs * 1e9, rate_peak_flops_per_s(gpu, "fp16")
        layer = predict(arch, gpu, tp, tokens, cal)
        kernels = VLLM_KERNELS_PER_LAYER - 1                 # vLLM's fused layer without its attention kernel
        roof = roofline_s(ops, arch, tp, tokens, bw, peak, adds)
        cid = f"{gdir}:{model}:tp{tp}:{tokens}"
        case = Case(cid, HELD_OUT_SET, "held-out", layer.time_s(kernels), measured, "s",
                    {ROOFLINE: roof, ROOFLINE_075: roof / 0.75, VIDUR_KERNELS: layer.time_s(vidur_kernels)})
        cases.append(case)
        if gdir == "a100":
            g2 = gpus[SXM]
            sxm = predict(arch, g2, tp, tokens, cal)
            roof2 = roofline_s(ops, arch, tp, tokens, g2.memory_bandwidth_gbs * 1e9, rate_peak_flops_per_s(g2, "fp16"),
                               adds)
            sxm_cases.append(Case(cid, HELD_OUT_SET, "held-out", case.predicted, measured, "s",
                                  {AS_SXM: sxm.time_s(kernels), ROOFLINE: roof, ROOFLINE_075: roof / 0.75,
                                   f"{ROOFLINE} (SXM4)": roof2, f"{ROOFLINE_075} (SXM4)": roof2 / 0.75}))
        rows.append({"id": cid, "gpu": gdir, "model": model, "tp": tp, "tokens": tokens, "band": band_of(tokens),
                     "measured_s": measured, "gemms_s": gemm_ms, "others_s": measured - gemm_ms,
                     "other_kernels": other_kernels, "mem_s": layer.mem_s, "flop_s": layer.flop_s,
                     "arithmetic_wins": layer.flop_s > layer.mem_s, "layer_bytes": layer.layer_bytes,
                     "bw_share": layer.layer_bytes / bw / gemm_ms, "error": case.error})
    record_scoring(HELD_OUT_SET)
    by_id = {c.id: c for c in cases}
    r = pd.DataFrame(rows)
    cols = (ROOFLINE, ROOFLINE_075, VIDUR_KERNELS)

    def table(label: str, key: str, order) -> list[str]:
        out = [f"| {label} | n | {MODEL} | {ROOFLINE} | {ROOFLINE_075} | {VIDUR_KERNELS} |", "|---|---|---|---|---|---|"]
        for value in order:
            ids = r.id[r[key] == value]
            out.append(comparison_row(str(value), [by_id[i] for i in ids], cols))
        out.append(comparison_row("**all**", cases, cols))
        return out

    gpus_seen = sorted(set(r.gpu))
    bands = [b for b, _, _ in BANDS]
    won = r.arithmetic_wins
    held = [by_id[i] for i in r.id[~won]]
    insample = [by_id[i] for i in r.id[won]]
    gemm_part = {}
    lines = ["# Decode layers on vidur (issue 24): gpuwise's decode model, one layer, against vidur's kernels", "",
             f"Script: `benchmarks/decode_layers.py` ({time.time() - t0:.0f} s on this machine, {os.cpu_count()} cores). "
             "Data: `kernels-modern/vidur_mlp_ops.csv.gz` (vidur's fp16 sarathi-serve layer operators, kineto kernel "
             "durations) and `vidur_model_shapes.csv`. Protocol: `benchmarks/README.md`, tenth session, written before "
             f"this score ({scored_words(HELD_OUT_SET)}). **Nothing fitted on these rows**; rows: num_tokens <= "
             f"{MAX_TOKENS} (vLLM's default max_num_seqs: a decode batch's tokens), {len(cases)} layers "
             f"({len(dropped)} dropped for a missing operator).", "",
             "Measured: one layer's norms, QKV/O/up/down GEMMs, rotary, activation and residual adds (vidur's `add` "
             "counted twice: it times the second of two; phi-2 once). Predicted: `decode_step`'s share of a layer: "
             "max(layer weights / (datasheet bandwidth x DECODE_BW_EFF 0.80), the layer's GEMMs at the tensor-core "
             f"law) + {VLLM_KERNELS_PER_LAYER - 1} x kernel_latency_s ({cal.p('kernel_latency_s') * 1e6:.0f} us). "
             f"GPUs: a100 -> `{VIDUR_GPUS['a100']}`, h100 -> `{VIDUR_GPUS['h100']}`, a40 -> `{VIDUR_GPUS['a40']}`.",
             "", f"Error = predicted / measured layer time - 1 (negative: predicted fast); cells: {CELL_HEADER}.", "",
             "## All rows", "", *table("GPU", "gpu", gpus_seen), "",
             verdict(cases, ROOFLINE_075, MODEL), "", verdict(cases, ROOFLINE, MODEL), "",
             "## By token band (the decode batch)", "", *table("tokens", "band", bands), "",
             "## By tensor-parallel degree", "", *table("TP", "tp", sorted(set(r.tp))), "",
             "## By model", "", *table("model", "model", sorted(set(r.model))), "",
             "## Held out vs in sample: which term of the max wins", "",
             "The tensor-core GEMM law was fitted on vidur's GEMMs, these rows' included: where the arithmetic term "
             "wins, the prediction is in sample.", "",
             f"| rows | n | {MODEL} | {ROOFLINE} | {ROOFLINE_075} | {VIDUR_KERNELS} |", "|---|---|---|---|---|---|",
             comparison_row("weight read wins (held out)", held, cols) if held else "| weight read wins | 0 | n/a |",
             comparison_row("arithmetic wins (in sample)", insample, cols) if insample else
             "| arithmetic wins | 0 | n/a |", "",
             "Rows where the arithmetic wins, by band: " + ", ".join(
                 f"{b} {int(won[r.band == b].sum())} of {int((r.band == b).sum())}" for b in bands) + ".", "",
             "## The A100 read as the SXM4 (the brief's choice; not the verdict)", "",
             f"| rows | n | {MODEL} (PCIe) | {AS_SXM} | {ROOFLINE} (PCIe) | {ROOFLINE_075} (PCIe) | {ROOFLINE} (SXM4) | "
             f"{ROOFLINE_075} (SXM4) |", "|---|---|---|---|---|---|---|---|",
             comparison_row("a100", sxm_cases, (AS_SXM, ROOFLINE, ROOFLINE_075, f"{ROOFLINE} (SXM4)",
                                                f"{ROOFLINE_075} (SXM4)")), "",
             "## Diagnostics (descriptive; nothing set from them)", "",
             "Bandwidth share the GEMMs reach: (layer weight bytes / datasheet bandwidth) / measured time of the four "
             "GEMMs, median (the product assumes 0.80 whenever the weight read wins). Time per non-GEMM kernel: the "
             "norms', rotary's, activation's and both adds' measured time over their kernel count, median (the product "
             f"charges {cal.p('kernel_latency_s') * 1e6:.0f} us a kernel, GEMMs included). GEMM part: the product's "
             "max(weight read, arithmetic) / the measured GEMMs - 1, signed median.", "",
             "| GPU | tokens | n | bandwidth share | us per non-GEMM kernel | GEMM part, signed | layer, signed |",
             "|---|---|---|---|---|---|---|"]
    for g in gpus_seen:
        for b in bands:
            s = r[(r.gpu == g) & (r.band == b)]
            if s.empty:
                continue
            part = (s[["mem_s", "flop_s"]].max(axis=1) / s.gemms_s - 1).median()
            gemm_part[f"{g}:{b}"] = part
            lines.append(f"| {g} | {b} | {len(s)} | {s.bw_share.median():.2f} | "
                         f"{(s.others_s / s.other_kernels).median() * 1e6:.1f} | {part:+.1%} | {s.error.median():+.1%} |")
    lines.append("")
    lines.append("| TP | n | bandwidth share | us per non-GEMM kernel | GEMM part, signed | layer, signed |")
    lines.append("|---|---|---|---|---|---|")
    for tp in sorted(set(r.tp)):
        s = r[r.tp == tp]
        part = (s[["mem_s", "flop_s"]].max(axis=1) / s.gemms_s - 1).median()
        lines.append(f"| {tp} | {len(s)} | {s.bw_share.median():.2f} | {(s.others_s / s.other_kernels).median() * 1e6:.1f} "
                     f"| {part:+.1%} | {s.error.median():+.1%} |")
    lines += ["", "Share of the measured layer in the GEMMs, median by band: " + ", ".join(
        f"{b} {(r.gemms_s / r.measured_s)[r.band == b].median():.0%}" for b in bands) + "."]
    if dropped:
        lines += ["", "Dropped (an operator missing): " + "; ".join(dropped[:10]) + (" ..." if len(dropped) > 10 else "")]

    def summaries(cs: list[Case], names=cols) -> dict:
        return {MODEL: summarize_cases(cs), **{n: summarize_cases(cs, n) for n in names}}

    write_results("decode_layers", lines, {
        "set": HELD_OUT_SET, "max_tokens": MAX_TOKENS, "gpus": dict(VIDUR_GPUS),
        "all": summaries(cases),
        "by_gpu": {g: summaries([by_id[i] for i in r.id[r.gpu == g]]) for g in gpus_seen},
        "by_band": {b: summaries([by_id[i] for i in r.id[r.band == b]]) for b in bands},
        "by_tp": {str(tp): summaries([by_id[i] for i in r.id[r.tp == tp]]) for tp in sorted(set(r.tp))},
        "held_out_rows": summaries(held), "in_sample_rows": summaries(insample) if insample else None,
        "a100_as_sxm4": {AS_SXM: summarize_cases(sxm_cases, AS_SXM), MODEL: summarize_cases(sxm_cases)},
        "gemm_part_signed": gemm_part, "dropped": dropped,
        "rows": rows})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
