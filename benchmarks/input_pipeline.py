"""CPU cost of feeding images to a GPU: JPEG decode + torchvision's ImageNet transforms, per image, one core.

    python -m benchmarks.input_pipeline           # writes benchmarks/results/input_pipeline.md (+ .json)
    python -m benchmarks.input_pipeline --ship    # and src/gpuwise/runtime/input_costs.json, which gpuwise uses

``make bench`` re-measures without ``--ship``: the shipped constants change only when someone decides
to (a shared machine's noisy re-run is not a reason), and the results file shows both.

What ``--cpu-workers N`` turns into an input rate (``gpuwise.runtime.input_pipeline``): each
DataLoader worker is one process on one core running ``ImageFolder``'s loader (PIL open +
``convert("RGB")``) and the standard transforms:

* train: ``RandomResizedCrop(S)``, ``RandomHorizontalFlip()``, ``ToTensor()``, ``Normalize(...)``
* eval: ``Resize(S * 256 / 224)``, ``CenterCrop(S)``, ``ToTensor()``, ``Normalize(...)``

No data set can be downloaded here, so the JPEGs are made: 500 x 375 pixels (ImageNet's most common
size) with smooth structure plus grain, saved at quality 90, their file size checked against
ImageNet's mean of ~110 KB (ILSVRC-2012 train: ~140 GB over 1.28 M images). The cost per image is
fitted as ``fixed + per_pixel x S^2`` over S = 128, 224, 384 (decode is the fixed part). Measured on
this machine's CPU: a rented GPU's host CPU differs (the JSON says which CPU); the figure is an
estimate of one core's work, not of the user's machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import transforms as T

from benchmarks.harness import REPO, write_results
from benchmarks.machine import require_quiet_machine

OUT_JSON = REPO / "src" / "gpuwise" / "runtime" / "input_costs.json"
SIZES = (128, 224, 384)
IMAGES = 48
WIDTH, HEIGHT, QUALITY = 500, 375, 90
IMAGENET_MEAN_KB = 110
GRAIN = 24          # grain std (of 255) that brings the files to ImageNet's mean size (checked in main)
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def make_jpegs(count: int, seed: int = 0) -> list[bytes]:
    """Photo-like JPEGs: a smooth random field (upsampled coarse noise) with fine grain on top."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        coarse = rng.uniform(0, 255, (HEIGHT // 25 + 1, WIDTH // 25 + 1, 3)).astype(np.uint8)
        smooth = np.asarray(Image.fromarray(coarse).resize((WIDTH, HEIGHT), Image.BICUBIC), dtype=np.float32)
        grain = rng.normal(0, GRAIN, (HEIGHT, WIDTH, 3))
        img = Image.fromarray(np.clip(smooth + grain, 0, 255).astype(np.uint8))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=QUALITY)
        out.append(buf.getvalue())
    return out


def pipeline(size: int, training: bool):
    if training:
        steps = [T.RandomResizedCrop(size), T.RandomHorizontalFlip()]
    else:
        steps = [T.Resize(round(size * 256 / 224)), T.CenterCrop(size)]
    return T.Compose([*steps, T.ToTensor(), T.Normalize(MEAN, STD)])


def per_image_s(jpegs: list[bytes], size: int, training: bool, repeats: int = 3) -> float:
    """Median over repeats of the mean time of one image: open, decode, transform (one thread)."""
    tf = pipeline(size, training)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for data in jpegs:
            tf(Image.open(io.BytesIO(data)).convert("RGB"))
        times.append((time.perf_counter() - t0) / len(jpegs))
    return float(np.median(times))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ship", action="store_true", help="also write src/gpuwise/runtime/input_costs.json")
    args = ap.parse_args()
    require_quiet_machine("input_pipeline")
    torch.set_num_threads(1)          # a DataLoader worker is one process on one core
    jpegs = make_jpegs(IMAGES)
    mean_kb = float(np.mean([len(j) for j in jpegs])) / 1024
    assert abs(mean_kb / IMAGENET_MEAN_KB - 1) < 0.1, f"synthetic JPEGs average {mean_kb:.0f} KB"
    for data in jpegs[:2]:
        tf = pipeline(224, True)
        tf(Image.open(io.BytesIO(data)).convert("RGB"))       # warm-up
    doc = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "source_image": f"{WIDTH}x{HEIGHT} JPEG, quality {QUALITY}, "
           f"mean {mean_kb:.0f} KB (ImageNet's mean ~{IMAGENET_MEAN_KB} KB)", "pil": Image.__version__,
           "measured": {}, "fit": {}}
    lines = ["# Input pipeline: CPU cost per image", "",
             f"Script: `benchmarks/input_pipeline.py`. CPU: {doc['cpu']} (one thread, as one "
             f"DataLoader worker). Images: {IMAGES} synthetic {doc['source_image']}. PIL {Image.__version__}. "
             f"Load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores when it started.", "",
             "| transforms | output side (px) | ms per image, one core | images/s per core |", "|---|---|---|---|"]
    for mode in ("train", "eval"):
        xs, ys = [], []
        for size in SIZES:
            s = per_image_s(jpegs, size, mode == "train")
            doc["measured"][f"{mode}_{size}"] = round(s, 6)
            xs.append(size * size)
            ys.append(s)
            lines.append(f"| {mode} | {size} | {s * 1e3:.2f} | {1 / s:.0f} |")
            print(mode, size, f"{s * 1e3:.2f} ms", flush=True)
        per_pixel, fixed = np.polyfit(xs, ys, 1)
        doc["fit"][mode] = {"fixed_s": float(f"{max(fixed, 0.0):.4g}"), "per_pixel_s": float(f"{max(per_pixel, 0.0):.4g}")}
    lines += ["", "Fit (what `--cpu-workers` uses): seconds per image = fixed + per_pixel x side^2:", "",
              "| transforms | fixed (ms) | per output megapixel (ms) |", "|---|---|---|",
              *[f"| {m} | {f['fixed_s'] * 1e3:.2f} | {f['per_pixel_s'] * 1e9:.2f} |" for m, f in doc["fit"].items()],
              "", "The decode of the 500 x 375 source is most of the fixed part. A rented machine's cores may be "
              "faster or slower than this one; the GPU side does not depend on it.", ""]
    shipped = json.loads(OUT_JSON.read_text())
    if args.ship:
        OUT_JSON.write_text(json.dumps(doc, indent=2) + "\n")
    else:
        lines += [f"Shipped (`src/gpuwise/runtime/input_costs.json`, measured {shipped['date']}, not rewritten by "
                  "this run): " + "; ".join(f"{m} {f['fixed_s'] * 1e3:.2f} ms + {f['per_pixel_s'] * 1e9:.2f} ms per "
                                             "megapixel" for m, f in shipped["fit"].items()) + ".", ""]
    write_results("input_pipeline", lines, {**doc, "shipped": shipped if not args.ship else doc})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
