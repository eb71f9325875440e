"""LLM training step time on MosaicML's MPT tables (llm-foundry, A100 40/80 GB and H100, 8-512 GPUs, FSDP).

Scores the closed form `estimate` and `recommend` use for decoder LLMs (``plan.llm.estimate_llm``:
``memory.llm.train_memory`` + ``runtime.llm.train_step_time``) on every bf16 row of
``llm-train/llm_foundry_mpt_train.csv``. Nothing is fitted on these rows: the whole set is held out
(protocol: benchmarks/README.md, "Fifth session"). Writes benchmarks/results/llm_train_time.md (+ .json)
(run: python -m benchmarks.llm_train_time).

Each row is the table's own job: MPT's shape from llm-foundry's yamls (``MPT_SHAPES``: d_model, heads,
layers; expansion ratio 4, vocabulary 50,368), checked against the row's ``NumParams`` less its learned
position table (d_model x sequence length, a lookup the closed form leaves out); its sequence length,
micro-batch, accumulation, GPU count, sharding, activation checkpointing and precision; flash attention;
the GPU by the table's NVML name. Several nodes talk over the table's 1,600 Gb/s RoCE per node.
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from dataclasses import replace

from benchmarks.harness import (CELL_HEADER, DATA, ROOFLINE, ROOFLINE_075, Case, comparison_row, record_scoring,
                                scored_words, verdict, write_results)
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import Link, topology_data, topology_for
from gpuwise.plan.llm import estimate_llm
from gpuwise.runtime.rates import peak_flops_per_s
from gpuwise.workload import Workload
from gpuwise.workload.decoder import arch_from_config

SOURCE = DATA / "llm-train" / "llm_foundry_mpt_train.csv"
HELD_OUT_SET = "LLM training time: llm-foundry MPT"
# llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml: (d_model, n_heads, n_layers)
MPT_SHAPES = {"125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24), "1b": (2048, 16, 24),
              "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 56, 48),
              "70b": (8192, 64, 80)}
MPT_VOCAB = 50_368
PRECISIONS = {"amp_bf16": "amp-bf16", "bf16": "bf16"}
SHARDINGS = {"FULL_SHARD": "fsdp", "SHARD_GRAD_OP": "zero2"}
GPUS_PER_NODE = 8
NETWORK_GBPS_PER_NODE = 1600      # the table's "1600 Gbps node-node interconnect (RoCE)"
PARAMS_TOLERANCE = 0.01


def mpt_arch(size: str, seq_len: int):
    d, heads, layers = MPT_SHAPES[size]
    return arch_from_config({"model_type": "mpt", "architectures": ["MPTForCausalLM"], "d_model": d,
                             "n_heads": heads, "n_layers": layers, "expansion_ratio": 4, "vocab_size": MPT_VOCAB,
                             "max_seq_len": seq_len, "no_bias": True})


def roce_topology(gpu):
    """The GPU's usual node, 8 a node, nodes linked by 1,600 Gb/s RoCE at the catalog's RoCE efficiency."""
    spec = topology_data()["network"]["roce"]
    network = Link("roce", NETWORK_GBPS_PER_NODE / 8 * float(spec["bus_efficiency"]), float(spec["latency_s"]),
                   f"{NETWORK_GBPS_PER_NODE} Gb/s RoCE per node (llm-foundry's table)")
    return replace(topology_for(gpu), gpus_per_node=GPUS_PER_NODE, multi_node=True, network=network, note="")


def roofline_step_s(arch, w: Workload, gpu) -> float:
    """6 x parameters x tokens + the causal attention's FLOPs (forward x 3), at the datasheet bf16 peak."""
    s = w.tokens_per_sequence
    tokens = w.batch_size * s * w.grad_accum_steps
    flops = 3.0 * arch.forward_flops_per_token((s + 1) / 2) * tokens
    return flops / peak_flops_per_s(gpu, "bf16")


def _mfu_words(detail: list[dict], key: str) -> str:
    values = [d[key] for d in detail]
    return f"{statistics.median(values):.1f}% (range {min(values):.1f}-{max(values):.1f}%)"


def load_rows():
    with open(SOURCE, newline="") as f:
        return list(csv.DictReader(f))


def score_rows() -> tuple[list[Case], list[dict], dict[str, int]]:
    """(cases, detail, left out by reason): every bf16 row of the table predicted by the closed form; nothing
    recorded (``main`` and ``time_accuracy`` count their scorings). ``detail`` carries each prediction's regime."""
    catalog = load_catalog(user_file=False)
    cases: list[Case] = []
    left_out: dict[str, int] = defaultdict(int)
    detail: list[dict] = []
    for i, row in enumerate(load_rows()):
        precision = PRECISIONS.get(row["Precision"])
        if precision is None:
            left_out[f"precision {row['Precision']} (no fp8 training path in the closed form)"] += 1
            continue
        size, seq = row["Model"], int(row["SeqLen (T)"])
        arch = mpt_arch(size, seq)
        published = int(row["NumParams"]) - MPT_SHAPES[size][0] * seq        # less the learned position table
        if abs(arch.param_counts().total / published - 1) > PARAMS_TOLERANCE:
            left_out["shape off the table's NumParams by > 1%"] += 1
            continue
        gpu = resolve_gpu(catalog, row["gpu_nvml_guess"].split(" (")[0])
        n = int(row["# GPUs"])
        w = Workload(f"mpt-{size}", mode="train", finetune="full", seq_len=seq, batch_size=int(row["MicroBatchSize"]),
                     grad_accum_steps=int(row["GradAccum"]), num_gpus=n, precision=precision, optimizer="adamw",
                     sharding=SHARDINGS[row["Sharding Strategy"]], attention="flash2",
                     grad_checkpointing=row["Activation Checkpointing"] == "True")
        est = estimate_llm(w, gpu, arch=arch, topology=roce_topology(gpu))
        tokens_per_gpu_step = w.batch_size * seq * w.grad_accum_steps
        measured_s = tokens_per_gpu_step / float(row["Throughput (T/s/GPU)"])
        roof = roofline_step_s(arch, w, gpu)
        case = Case(f"{i}:{size}/{seq}/{n}x{row['GPU']}/mb{w.batch_size}x{w.grad_accum_steps}", HELD_OUT_SET,
                    "held-out", est.time.step_time_s, measured_s, "s", {ROOFLINE: roof, ROOFLINE_075: roof / 0.75})
        cases.append(case)
        detail.append({"case": case.id, "gpu": gpu.id, "size": size, "count": n, "seq_len": seq,
                       "checkpointing": w.grad_checkpointing, "measured_mfu_pct": float(row["MFU"]),
                       # the table's MFU at the predicted step time (the same FLOPs per step)
                       "predicted_mfu_pct": float(row["MFU"]) * measured_s / est.time.step_time_s,
                       "bound": est.time.bound, "regime": est.time.regime, "error": case.error})
    if not cases:
        raise SystemExit("llm_train_time: no rows scored (is ../shared/data/public-benchmarks/llm-train/ there?)")
    return cases, detail, dict(left_out)


def main() -> None:
    cases, detail, left_out = score_rows()
    count = record_scoring(HELD_OUT_SET)
    baselines = (ROOFLINE, ROOFLINE_075)
    lines = ["# LLM training step time: llm-foundry's MPT tables", "",
             f"{len(cases)} rows of `llm-train/llm_foundry_mpt_train.csv` (MosaicML, A100 40/80 GB and H100, "
             "8-512 GPUs, FSDP, flash attention), every one held out: nothing is fitted on them "
             f"({scored_words(HELD_OUT_SET)}; this run is number {count}). Error = predicted / measured - 1 of "
             "the step time: negative is predicted faster than measured.", "",
             f"| rows | n | gpuwise | {ROOFLINE} | {ROOFLINE_075} |", "|---|---|---|---|---|",
             f"| (cells: {CELL_HEADER}) | | | | |",
             comparison_row("all", cases, baselines)]
    by_gpu, by_size, by_nodes, by_ckpt = defaultdict(list), defaultdict(list), defaultdict(list), defaultdict(list)
    for c, d in zip(cases, detail):
        by_gpu[d["gpu"]].append(c)
        by_size[d["size"]].append(c)
        by_nodes["one node (8 GPUs)" if d["count"] <= GPUS_PER_NODE else "several nodes"].append(c)
        by_ckpt["activation checkpointing" if d["checkpointing"] else "no activation checkpointing"].append(c)
    for group in (by_gpu, by_nodes, by_ckpt):
        for label in sorted(group):
            lines.append(comparison_row(label, group[label], baselines))
    for label in MPT_SHAPES:
        if by_size.get(label):
            lines.append(comparison_row(f"MPT-{label}", by_size[label], baselines))
    lines += ["", verdict(cases, ROOFLINE_075), "",
              "Left out: " + ("; ".join(f"{n} rows: {why}" for why, n in left_out.items()) or "none") + ".",
              "", f"Measured MFU on the scored rows: median {_mfu_words(detail, 'measured_mfu_pct')}; predicted (the "
              f"table's MFU at the predicted step time): median {_mfu_words(detail, 'predicted_mfu_pct')}. The closed "
              "form's utilisation comes from the per-kernel laws (runtime/llm_kernels.py: every GEMM, attention and "
              "memory-bound kernel of the step at the laws and calibration of a traced step), none of it fitted here."]
    write_results("llm_train_time", lines, {"held_out_set": HELD_OUT_SET, "scored": count, "cases": cases,
                                            "detail": detail, "left_out": dict(left_out)})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
