"""The measured cases of the time benchmark: public throughputs mapped to traces and catalog GPUs.

Sources (shared/data/public-benchmarks, see its README):
* lambda_train.csv: ResNet-50 and BERT-base/large SQuAD (seq 384) training, 1 GPU, NGC containers,
  AMP ("fp16") and "fp32" (TF32 on Ampere and newer), per-GPU batch given (missing for the newest
  runs: the H100 SXM batch is assumed there, and the case says so).
* timm benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv: training, AMP, SGD, eager, batch in file.
* timm benchmark-infer-amp-nchw-{pt240-cu124-rtx3090, pt240-cu124-rtx4090, pt291-cu130-5090}.csv:
  inference, AMP, eager, batch and image size in the file; and the fresh check's
  benchmark-infer-amp-nchw-pt291-cu130-pro6000maxq.csv (split "fresh").

GPU specs come from the catalog where it has the GPU, else from gpu_datasheets.csv, else from the
small table below (datasheets cited), so cases exist for GPUs the catalog does not list yet.
"""

from __future__ import annotations

import csv
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import DATA
from benchmarks.time_traces import TraceKey
from gpuwise.catalog.model import GPU

TIMM_MODELS = {
    # model: family
    "resnet18": "resnet", "resnet34": "resnet", "resnet50": "resnet", "resnet101": "resnet",
    "resnet152": "resnet", "resnext50_32x4d": "resnet", "seresnet50": "resnet", "resnet50d": "resnet",
    "densenet121": "classic-cnn", "inception_v3": "classic-cnn", "dla34": "classic-cnn",
    "efficientnet_b0": "mobile-cnn", "mobilenetv2_100": "mobile-cnn", "mnasnet_100": "mobile-cnn",
    "mixnet_s": "mobile-cnn", "ghostnet_100": "mobile-cnn",
    "regnety_016": "regnet", "regnety_032": "regnet", "regnetx_032": "regnet",
    "convnext_tiny": "convnext", "convnext_base": "convnext",
    "vit_tiny_patch16_224": "vit", "vit_base_patch16_224": "vit", "deit_small_patch16_224": "vit",
    "vit_base_patch32_224": "vit", "vit_large_patch16_224": "vit", "beit_base_patch16_224": "vit",
    "swin_tiny_patch4_window7_224": "hier-vit", "twins_svt_small": "hier-vit", "pit_s_224": "hier-vit",
    "resmlp_12_224": "mlp",
}
TRANSFORMER_FAMILIES = {"vit", "hier-vit", "mlp", "bert"}

TIMM_INFER_FILES = {
    "rtx-3090": "benchmark-infer-amp-nchw-pt240-cu124-rtx3090.csv",
    "rtx-4090": "benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv",
    "rtx-5090": "benchmark-infer-amp-nchw-pt291-cu130-5090.csv",
}
TIMM_TRAIN_FILE = "benchmark-train-amp-nchw-pt112-cu113-rtx3090.csv"
# The fresh check (benchmarks/README.md): a file no fit or score had read, scored once as it stands.
TIMM_FRESH_FILES = {"rtx-pro-6000-maxq": "benchmark-infer-amp-nchw-pt291-cu130-pro6000maxq.csv"}
FRESH_GPUS = tuple(TIMM_FRESH_FILES)

# Lambda's GPU names -> (gpu id, catalog id or datasheet (gpu, variant prefix) or None for the table).
LAMBDA_GPUS = {
    "Quadro RTX 8000": "quadro-rtx-8000",
    "LambdaCloud V100 16GB": "v100-16gb-sxm2",
    "RTX 3090": "rtx-3090",
    "LambdaCloud A10": "a10",
    "LambdaCloud A100 40GB PCIe": "a100-40gb-pcie",
    "A100 80GB PCIe": "a100-80gb-pcie",
    "A100 80GB SXM4": "a100-80gb-sxm4",
    "RTX 6000 Ada": "rtx-6000-ada",
    "RTX A6000": "rtx-a6000",
    "RTX 4090": "rtx-4090",
    "H100 80GB PCIe Gen5": "h100-pcie",
    "LambdaCloud H100 80GB PCIe Gen5": "h100-pcie",
    "LambdaOD_1x_Texas_1xH100_80GB_PCIe_209-20-158-50_v2": "h100-pcie",
    "H100 80GB SXM5": "h100-sxm",
    "Dell H100 80GB SXM5": "h100-sxm",
    "DellTexas H100 80GB SXM5": "h100-sxm",
    "SMC H100 80GB SXM5": "h100-sxm",
    "1CC H100 80GB SXM5": "h100-sxm",
    "RAIDZ1 H100 80GB SXM5": "h100-sxm",
    "LambdaOD_1x_1xH100_80GB_SXM5_192-222-52-83_v2": "h100-sxm",
    "LambdaBM_ENG04_1xH200_140GB_SXM_h200_v2": "h200",
    "LambdaOD_1x_1xGH200_96GB_192-222-57-0_v2": "gh200",
    "LambdaOD_test_1xB200_192GB_129-213-83-251_v2": "b200",
}
DATASHEET_ROWS = {   # gpu id -> (datasheet gpu, variant prefix)
    "a100-40gb-pcie": ("A100", "PCIe 40GB"), "a100-80gb-pcie": ("A100", "PCIe 80GB"),
    "rtx-a6000": ("RTX A6000", ""), "h100-pcie": ("H100", "PCIe"), "h200": ("H200", ""),
    "rtx-5090": ("RTX 5090", ""), "h100-sxm": ("H100", "SXM5"), "a100-80gb-sxm4": ("A100", "SXM4 80GB"),
    "rtx-3090": ("RTX 3090", ""), "rtx-4090": ("RTX 4090", ""), "a10": ("A10", ""),
    "v100-16gb-sxm2": ("V100", "SXM2"),
}
# Not in the datasheet file: (arch, SMs, GB/s, fp32, tf32, fp16/bf16 dense fp32-acc, pcie, nvlink, source)
EXTRA_SPECS = {
    "quadro-rtx-8000": ("turing", 72, 672, 16.3, None, 130.5, 3, None,
                        "NVIDIA Quadro RTX 8000 datasheet (full-rate fp32 accumulate)"),
    "rtx-6000-ada": ("ada", 142, 960, 91.1, 182.1, 364.2, 4, None,
                     "NVIDIA RTX 6000 Ada datasheet (1457 TFLOPS fp8 sparse -> 364 fp16 dense)"),
    "gh200": ("hopper", 132, 4000, 67, 494.7, 989.4, 5, 900, "NVIDIA GH200 datasheet (H100 + 96 GB HBM3)"),
    "b200": ("blackwell", 148, 8000, 80, 1100, 2250, 6, 1800,
             "NVIDIA HGX B200 datasheet (4.5 PF fp16 sparse -> 2.25 dense)"),
}
ASSUMED_BATCH = {("resnet50", "fp16"): 1280, ("resnet50", "fp32"): 640, ("bert_base_squad", "fp16"): 320,
                 ("bert_base_squad", "fp32"): 172, ("bert_large_squad", "fp16"): 112,
                 ("bert_large_squad", "fp32"): 64}
LAMBDA_MODELS = {"resnet50": ("timm:resnet50", 224, "resnet", "momentum"),
                 "bert_base_squad": ("hf:bert-base-squad", 384, "bert", "adamw"),
                 "bert_large_squad": ("hf:bert-large-squad", 384, "bert", "adamw")}


@dataclass(frozen=True)
class Case:
    source: str               # "lambda", "timm-train", "timm-infer"
    gpu: GPU
    key: TraceKey
    measured_samples_per_s: float
    family: str
    note: str = ""

    @property
    def kind(self) -> str:
        return "transformer" if self.family in TRANSFORMER_FAMILIES else "cnn"

    @property
    def name(self) -> str:
        k = self.key
        return f"{self.source}:{k.model.split(':')[-1]}:{k.mode}:b{k.batch_size}:{k.input_size}:{k.precision}@{self.gpu.id}"


def _num(text: str) -> float | None:
    m = re.match(r"\s*([0-9.]+)", text or "")
    return float(m.group(1)) if m else None


def _arch(text: str) -> str:
    for arch in ("turing", "volta", "ampere", "ada", "hopper", "blackwell"):
        if arch in text.lower():
            return arch
    raise ValueError(text)


def gpu_specs() -> dict[str, GPU]:
    """Every GPU the cases use: catalog first, then the datasheet file, then EXTRA_SPECS."""
    out: dict[str, GPU] = {}
    rows = list(csv.DictReader(open(DATA / "gpu_datasheets.csv")))
    for gid, (name, variant) in DATASHEET_ROWS.items():
        row = next(r for r in rows if r["gpu"] == name and r["variant"].startswith(variant))
        arch = _arch(row["arch"])
        half = _num(row["fp16_bf16_tensor_tflops_dense"])
        nv = {"h100-sxm": 900, "a100-80gb-sxm4": 600, "v100-16gb-sxm2": 300, "h200": 900}.get(gid)
        out[gid] = GPU(
            id=gid, name=f"{name} {row['variant']}", arch=arch, compute_capability="", sm_count=int(row["sm_count"]),
            cuda_cores=int(_num(row["cuda_cores"]) or 0), tensor_cores=int(_num(row["tensor_cores"]) or 0),
            memory_bytes=int((_num(row["mem_gb"]) or 0) * 2**30), memory_bandwidth_gbs=_num(row["mem_bw_gbs"]),
            l2_bytes=0, peak_tflops={"fp32": _num(row["fp32_tflops"]), "tf32": _num(row["tf32_tensor_tflops_dense"]),
                                     "fp16": half, "bf16": half if arch not in ("volta", "turing") else None},
            tdp_w=_num(row["tdp_w"]) or 0, pcie_gen=5 if arch in ("hopper", "blackwell") else 4,
            nvlink_gbs=nv, source=row["source"],
        )
    for gid, (arch, sm, bw, fp32, tf32, half, pcie, nv, src) in EXTRA_SPECS.items():
        out[gid] = GPU(
            id=gid, name=gid, arch=arch, compute_capability="", sm_count=sm, cuda_cores=0, tensor_cores=0,
            memory_bytes=0, memory_bandwidth_gbs=bw, l2_bytes=0,
            peak_tflops={"fp32": fp32, "tf32": tf32, "fp16": half, "bf16": half if arch != "turing" else None},
            tdp_w=0, pcie_gen=pcie, nvlink_gbs=nv, source=src,
        )
    try:  # the catalog's own figures win where it has the GPU
        from gpuwise.catalog import load_catalog

        for g in load_catalog(user_file=False).gpus:
            if g.id in out or g.id in FRESH_GPUS:
                out[g.id] = g
    except Exception:  # without a catalog the datasheets suffice
        pass
    return out


def lambda_cases(gpus: dict[str, GPU]) -> list[Case]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    batches: dict[tuple, list[int]] = defaultdict(list)
    for r in csv.DictReader(open(DATA / "lambda_train.csv")):
        if r["workload"] not in LAMBDA_MODELS or r["num_gpus"] != "1" or r["gpu_entry"] not in LAMBDA_GPUS:
            continue
        gid = LAMBDA_GPUS[r["gpu_entry"]]
        k = (gid, r["workload"], r["precision_label"])
        groups[k].append(float(r["throughput"]))
        if r["batch_size_per_gpu"]:
            batches[k].append(int(float(r["batch_size_per_gpu"])))
    cases = []
    for (gid, workload, label), values in sorted(groups.items()):
        gpu = gpus[gid]
        model, size, family, opt = LAMBDA_MODELS[workload]
        note = ""
        if batches[(gid, workload, label)]:
            batch = statistics.median_low(batches[(gid, workload, label)])
        else:
            batch, note = ASSUMED_BATCH[(workload, label)], "batch not published: H100 SXM's assumed"
        if label == "fp16":
            precision = "amp-fp16"
        else:   # NGC runs "fp32" with TF32 on where the GPU has it
            precision = "tf32" if gpu.peak("tf32") else "fp32"
        if len(values) > 1:
            note = (note + "; " if note else "") + f"median of {len(values)} Lambda runs"
        key = TraceKey(model, "train", batch, size, precision, opt)
        cases.append(Case("lambda", gpu, key, statistics.median(values), family, note))
    return cases


def timm_cases(gpus: dict[str, GPU], *, max_sizes: int = 2) -> list[Case]:
    cases = []
    for r in csv.DictReader(open(DATA / "timm" / TIMM_TRAIN_FILE)):
        if r["model"] in TIMM_MODELS:
            key = TraceKey(f"timm:{r['model']}", "train", int(float(r["train_batch_size"])),
                           int(float(r["train_img_size"])), "amp-fp16", "sgd")
            cases.append(Case("timm-train", gpus["rtx-3090"], key, float(r["train_samples_per_sec"]),
                              TIMM_MODELS[r["model"]], "PyTorch 1.12, CUDA 11.3"))
    for gid, fname in {**TIMM_INFER_FILES, **TIMM_FRESH_FILES}.items():
        rows = defaultdict(list)
        for r in csv.DictReader(open(DATA / "timm" / fname)):
            if r["model"] in TIMM_MODELS:
                rows[r["model"]].append(r)
        for model, rs in rows.items():
            # The model's default size (224 or its test size) and its largest: two shapes a model.
            rs = sorted(rs, key=lambda r: int(float(r["infer_img_size"])))
            picked = [r for r in rs if int(float(r["infer_img_size"])) >= 224][:1] + rs[-1:]
            seen = set()
            for r in picked[:max_sizes]:
                size = int(float(r["infer_img_size"]))
                if size in seen:
                    continue
                seen.add(size)
                key = TraceKey(f"timm:{model}", "infer", int(float(r["infer_batch_size"])), size, "amp-fp16", "none")
                cases.append(Case("timm-infer", gpus[gid], key, float(r["infer_samples_per_sec"]),
                                  TIMM_MODELS[model], fname.split("-", 4)[-1].removesuffix(".csv")))
    return cases


# The frozen split (benchmarks/README.md): GPU and model family held out together. Chosen before any
# score was seen; never to be changed to improve one.
HELD_OUT_GPUS = ("v100-16gb-sxm2", "a100-80gb-sxm4", "h100-sxm", "rtx-4090")
HELD_OUT_FAMILIES = ("resnet", "mobile-cnn", "bert", "vit")


def timm_infer_rows(name: str) -> dict[tuple[str, int], tuple[float, int]]:
    """(model, image size) -> (samples/s, batch) of one of timm's inference benchmark files."""
    out = {}
    for r in csv.DictReader(open(DATA / "timm" / name)):
        if r["model"] in TIMM_MODELS:
            out[(r["model"], int(float(r["infer_img_size"])))] = (float(r["infer_samples_per_sec"]),
                                                                  int(float(r["infer_batch_size"])))
    return out


# GPUs with training-side cases (time_accuracy.py checks the list against the cases).
TRAINING_GPUS = ("rtx-3090", "rtx-5090")


def split_of(case: Case) -> str:
    """"test" (GPU and family held out), "train" (neither) or "unused" (one of them: it would leak);
    "fresh" for the fresh check's GPU (README: scored once, never fitted on); "wider" (third session,
    README): a held-out family on a GPU that is not listed but has no training case either."""
    if case.gpu.id in FRESH_GPUS:
        return "fresh"
    gpu_out, family_out = case.gpu.id in HELD_OUT_GPUS, case.family in HELD_OUT_FAMILIES
    if gpu_out and family_out:
        return "test"
    if family_out and case.gpu.id not in TRAINING_GPUS:
        return "wider"
    return "unused" if gpu_out or family_out else "train"


def all_cases() -> list[Case]:
    gpus = gpu_specs()
    return lambda_cases(gpus) + timm_cases(gpus)


def write_csv(path: Path, rows: list[dict]) -> None:
    """Rows of one benchmark as CSV, floats to 5 significant digits (the per-case files in results/)."""
    path.parent.mkdir(exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()})
