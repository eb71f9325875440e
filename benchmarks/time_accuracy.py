"""How well gpuwise predicts step time on GPUs it has never seen: held-out error, per case.

    .venv/bin/python benchmarks/time_accuracy.py            # writes benchmarks/results/time.md (+ .csv, .png)

Every prediction scored here comes from a calibration fitted WITHOUT the case's GPU
(leave-one-GPU-out) or without the case's model family (leave-one-family-out). Next to it, on the
same cases: a plain roofline (datasheet peaks and bandwidth, no efficiency) and roofline / 0.75.
Error = |predicted step time / measured step time - 1|.
"""

from __future__ import annotations

import csv
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path


sys.path.insert(0, str(Path(__file__).parent))

from fit_time_calibration import calibration_from, case_arrays, fit, fit_excluded, stack_factor  # noqa: E402
from gpuwise.runtime import predict_step_time  # noqa: E402
from gpuwise.runtime.calibration import Calibration, load_calibration  # noqa: E402
from time_cases import all_cases, gpu_specs  # noqa: E402
from time_traces import TraceKey, load_trace  # noqa: E402

RESULTS = Path(__file__).parent / "results"
DATE = "2026-12-02"
IMAGENET_TRAIN_IMAGES = 1_281_167


def err(pred_s: float, meas_s: float) -> float:
    return abs(pred_s / meas_s - 1)


def summary(errors: list[float]) -> str:
    if not errors:
        return "n/a"
    e = sorted(errors)
    p90 = e[min(len(e) - 1, int(round(0.9 * (len(e) - 1))))]
    return f"{100 * statistics.median(e):.1f}% / {100 * p90:.1f}% / {100 * e[-1]:.1f}% (n={len(e)})"


def held_out(groups: dict[str, list[int]], arrays, measured, gpu_ids, used) -> dict[int, float]:
    """Predicted step time of every case, from a fit on all cases outside the case's group."""
    out: dict[int, float] = {}
    for name, idx in sorted(groups.items()):
        held = set(idx)
        train = [i for i in range(len(used)) if i not in held and not fit_excluded(used[i][0])]
        theta = fit([arrays[i] for i in train], [measured[i] for i in train], [gpu_ids[i] for i in train],
                    [used[i][0].source for i in train])
        cal = calibration_from(theta)
        trained_sources = {used[i][0].source for i in train}
        for i in idx:
            case, tr = used[i]
            # The case's software stack, as learnt from the other GPUs of its source (none: reference).
            stack = stack_factor(theta, case.source) if case.source in trained_sources else 1.0
            out[i] = predict_step_time(tr, case.gpu, calibration=cal).step_time_s * stack
        print(f"  held out {name}: {summary([err(out[i], measured[i]) for i in idx])}", flush=True)
    return out


def seed_claims(cal: Calibration) -> list[dict]:
    """ResNet-50 training at batch 32/64/128 on a T4 and a V100 (the seed's comparison)."""
    try:
        from gpuwise.catalog import load_catalog, resolve_gpu

        cat = load_catalog(user_file=False)
        t4, v100 = resolve_gpu(cat, "t4"), resolve_gpu(cat, "v100-16gb-sxm2")
    except Exception:
        specs = gpu_specs()
        t4, v100 = None, specs["v100-16gb-sxm2"]
    rows = []
    for precision in ("fp32", "amp-fp16"):
        for batch in (32, 64, 128):
            tr = load_trace(TraceKey("timm:resnet50", "train", batch, 224, precision, "momentum"))
            row = {"precision": precision, "batch": batch}
            for label, gpu in (("t4", t4), ("v100", v100)):
                if gpu is None:
                    continue
                st = predict_step_time(tr, gpu, calibration=cal)
                row[label] = st
            rows.append(row)
    return rows


def main() -> None:
    t0 = time.time()
    cases = all_cases()
    prior = Calibration()
    arrays, measured, gpu_ids, used = [], [], [], []
    skipped = []
    for c in cases:
        try:
            tr = load_trace(c.key)
        except Exception as e:
            skipped.append(f"{c.name}: {type(e).__name__}")
            continue
        arrays.append(case_arrays(tr, c.gpu, prior))
        measured.append(c.key.batch_size / c.measured_samples_per_s)
        gpu_ids.append(c.gpu.id)
        used.append((c, tr))
    print(f"{len(used)} cases, {len(skipped)} skipped, {time.time() - t0:.0f} s to load", flush=True)

    by_gpu, by_family = defaultdict(list), defaultdict(list)
    for i, (c, _) in enumerate(used):
        by_gpu[c.gpu.id].append(i)
        by_family[c.family].append(i)
    print("leave-one-GPU-out", flush=True)
    logo = held_out(by_gpu, arrays, measured, gpu_ids, used)
    print("leave-one-family-out", flush=True)
    lofo = held_out(by_family, arrays, measured, gpu_ids, used)

    roof = {i: arrays[i].roofline_s for i in range(len(used))}
    rows = []
    for i, (c, _) in enumerate(used):
        rows.append({
            "case": c.name, "source": c.source, "gpu": c.gpu.id, "arch": c.gpu.arch, "family": c.family,
            "kind": c.kind, "mode": c.key.mode, "precision": c.key.precision, "batch": c.key.batch_size,
            "measured_samples_per_s": c.measured_samples_per_s,
            "measured_step_s": measured[i], "logo_step_s": logo[i], "lofo_step_s": lofo[i],
            "roofline_step_s": roof[i], "err_logo": err(logo[i], measured[i]), "err_lofo": err(lofo[i], measured[i]),
            "err_roofline": err(roof[i], measured[i]), "err_roofline_075": err(roof[i] / 0.75, measured[i]),
            "note": c.note,
        })
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "time_cases.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in r.items()})
    seed = seed_claims(load_calibration())
    _figure(rows)
    _write_markdown(rows, seed, skipped, time.time() - t0)
    print((RESULTS / "time.md").read_text())


def _table(rows, key: str) -> list[str]:
    groups = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    out = [f"| {key} | cases | held-out GPU | held-out family | roofline | roofline x0.75 |", "|---|---|---|---|---|---|"]
    for name, rs in sorted(groups.items()):
        out.append(f"| {name} | {len(rs)} | {summary([r['err_logo'] for r in rs])} | "
                   f"{summary([r['err_lofo'] for r in rs])} | {summary([r['err_roofline'] for r in rs])} | "
                   f"{summary([r['err_roofline_075'] for r in rs])} |")
    return out


def _figure(rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, col, title in ((axes[0], "logo_step_s", "gpuwise, GPU held out"),
                           (axes[1], "roofline_step_s", "plain roofline (datasheet)")):
        for kind, marker in (("cnn", "o"), ("transformer", "^")):
            rs = [r for r in rows if r["kind"] == kind]
            ax.scatter([r["measured_step_s"] for r in rs], [r[col] for r in rs], s=14, marker=marker,
                       alpha=0.7, label=kind)
        lims = [min(r["measured_step_s"] for r in rows) / 2, max(r["measured_step_s"] for r in rows) * 2]
        ax.plot(lims, lims, "k-", lw=0.8)
        ax.plot(lims, [x * 1.15 for x in lims], "k:", lw=0.6)
        ax.plot(lims, [x / 1.15 for x in lims], "k:", lw=0.6)
        ax.set(xscale="log", yscale="log", xlabel="measured step time (s)", ylabel="predicted step time (s)",
               title=title)
        ax.legend()
    fig.suptitle(f"Step time: prediction vs public measurements ({len(rows)} cases, {DATE})")
    fig.tight_layout()
    fig.savefig(RESULTS / "time_accuracy.png", dpi=110)


def _versus(rows, baseline: str) -> str:
    """'better on X of N cases' for the held-out-GPU predictions against a baseline column."""
    better = sum(float(r["err_logo"]) < float(r[baseline]) for r in rows)
    return f"gpuwise (GPU held out) is closer on {better} of {len(rows)} cases"


def analysis(rows) -> list[str]:
    """What the figures say, computed from the rows (so the text never goes stale)."""
    med = lambda rs, k: 100 * statistics.median([float(r[k]) for r in rs]) if rs else float("nan")  # noqa: E731
    cnn = [r for r in rows if r["kind"] == "cnn"]
    tr = [r for r in rows if r["kind"] == "transformer"]
    lam_rn = [r for r in rows if r["source"] == "lambda" and r["family"] == "resnet"]
    rest = [r for r in rows if r not in lam_rn]
    ok = all(med(g, k) < 15 for g in (cnn, tr) for k in ("err_logo", "err_lofo"))
    return [
        "## What this shows", "",
        f"- Target (median < 15% on held-out CNN and transformer cases, >= 5 GPUs): "
        f"{'met' if ok else 'NOT met'}. CNN: {med(cnn, 'err_logo'):.1f}% (GPU held out), "
        f"{med(cnn, 'err_lofo'):.1f}% (family held out); transformers: {med(tr, 'err_logo'):.1f}% / "
        f"{med(tr, 'err_lofo'):.1f}%. Plain roofline: {med(cnn, 'err_roofline'):.1f}% / {med(tr, 'err_roofline'):.1f}%; "
        f"roofline x0.75: {med(cnn, 'err_roofline_075'):.1f}% / {med(tr, 'err_roofline_075'):.1f}%.",
        f"- Against the plain roofline: {_versus(rows, 'err_roofline')}. Against roofline x0.75 (itself a "
        f"one-parameter fit to these same data, with no held-out split): {_versus(rows, 'err_roofline_075')}. "
        "What a constant factor cannot give, and the time model is for: small or launch-bound steps, "
        "depthwise convolutions, fp32 vs TF32 vs AMP, bf16 on GPUs without it, and multi-GPU.",
        f"- Lambda's ResNet-50 ({len(lam_rn)} cases) is scored but never fitted (its fast GPUs are not "
        f"GPU-bound); without it the held-out-GPU median is {med(rest, 'err_logo'):.1f}%.",
        "- The error is largest where the software stack differs from the reference (eager PyTorch 2.x): "
        "Lambda's NGC containers (every datacenter GPU here) and timm's PyTorch 1.12 training runs. "
        "Published throughputs of one GPU differ 1.5x between stacks (README of the data), and one stack "
        "constant per source absorbs only the average of that.",
        "- Not yet measured: small batches (launch-bound regime), multi-GPU, and GPUs of the catalog that "
        "have no public figures here (T4, L4, L20, H800): their predictions rest on their datasheets and "
        "the class parameters (the architecture factors stay near 1). The T4's 70 W throttling is not in "
        "its datasheet: its figures are optimistic.",
    ]


def _seed_discussion(seed) -> list[str]:
    ratios = {(r["precision"], r["batch"]): r["v100"].samples_per_s / r["t4"].samples_per_s
              for r in seed if r.get("t4") is not None and r.get("v100") is not None}
    if not ratios:
        return ["(T4 or V100 missing from the catalog: not predicted.)"]
    lo, hi = min(ratios.values()), max(ratios.values())
    launch = [f"{p} b{b}" for r in seed for p, b in [(r["precision"], r["batch"])]
              if r.get("t4") is not None and r["t4"].bound == "launch"]
    fp32_128 = ratios.get(("fp32", 128))
    amp = {r["batch"]: r for r in seed if r["precision"] == "amp-fp16" and r.get("t4") is not None}
    amp128_t4 = IMAGENET_TRAIN_IMAGES / amp[128]["t4"].samples_per_s / 60 if 128 in amp else float("nan")
    amp128_v = IMAGENET_TRAIN_IMAGES / amp[128]["v100"].samples_per_s / 60 if 128 in amp else float("nan")
    return [
        f"gpuwise predicts the V100 {lo:.1f}x to {hi:.1f}x faster than the T4 at every batch from 32 to 128 "
        f"(fp32 at batch 128: {fp32_128:.2f}x; the seed's 45 vs 18 min/epoch is 2.5x). Why: ResNet-50 "
        "training at these batches is neither launch- nor host-bound on either GPU "
        f"({'launch-bound: ' + ', '.join(launch) if launch else 'no case is launch-bound'}): about 160 "
        "convolutions and 320 norm/elementwise kernels per micro-step, each large enough to keep the GPU "
        "busy for longer than eager PyTorch needs to issue it. The V100 has 1.9x the T4's fp32 rate "
        "(15.7 vs 8.1 TFLOPS; neither has TF32), 1.9x its fp16 tensor rate (125 vs 65) and 2.8x its "
        "bandwidth (900 vs 320 GB/s); the ratio therefore barely moves with the batch. (The T4's 70 W board "
        "also throttles under sustained load, which the datasheet peak, and so gpuwise, does not show: "
        "its T4 figures are optimistic.)",
        "",
        f"With AMP at batch 128 the prediction is {amp128_t4:.0f} min/epoch on the T4 and {amp128_v:.0f} on the V100, "
        "close to the seed's 45 and 18: the seed most likely trained with mixed precision.",
        "",
        "So the model agrees with the seed's batch-128 figure and does NOT reproduce \"below batch 64 the T4 "
        "is within 10% of the V100\". That observation fits a job whose step was bound by something both "
        "GPUs share: the input pipeline (JPEG decoding and augmentation on a few CPU cores deliver a fixed "
        "number of images per second, whatever the GPU) or a per-step synchronisation. gpuwise times the "
        "GPU step with synthetic data; a data-loader-bound job needs `gpuwise monitor` (GPU utilisation "
        "well under 100%) to be seen, and there the cheaper T4 is indeed the right rental.",
    ]


def _write_markdown(rows, seed, skipped, secs) -> None:
    cal = load_calibration()
    cnn_tr = [r for r in rows if r["kind"] in ("cnn", "transformer")]
    gpus = sorted({r["gpu"] for r in rows})
    lines = [
        "# Time predictor accuracy", "",
        f"Date: {DATE}. Script: `benchmarks/time_accuracy.py` ({secs:.0f} s on the 2-core dev machine, traces cached "
        "in `benchmarks/cache/`). Data: `shared/data/public-benchmarks/` (lambda_train.csv; timm RTX 3090 training "
        "PT 1.12; timm inference RTX 3090/4090 PT 2.4, RTX 5090 PT 2.9.1; all eager). "
        f"{len(rows)} cases on {len(gpus)} GPUs: {', '.join(gpus)}.", "",
        "Error = |predicted / measured step time - 1|; cells are **median / p90 / worst**. Every gpuwise figure "
        "comes from a calibration fitted without the case's GPU (held-out GPU) or without the case's model "
        "family (held-out family). The roofline columns use datasheet peaks for the precision the kernels run in "
        "and datasheet bandwidth, per operator, no efficiency, no launch cost.", "",
        "![prediction vs measurement](time_accuracy.png)", "",
        "## Summary", "",
        "| cases | held-out GPU | held-out family | roofline | roofline x0.75 |", "|---|---|---|---|---|",
        f"| all | {summary([r['err_logo'] for r in cnn_tr])} | {summary([r['err_lofo'] for r in cnn_tr])} | "
        f"{summary([r['err_roofline'] for r in cnn_tr])} | {summary([r['err_roofline_075'] for r in cnn_tr])} |",
        "", *analysis(rows),
        "", "## By kind", "", *_table(rows, "kind"),
        "", "## By GPU", "", *_table(rows, "gpu"),
        "", "## By model family", "", *_table(rows, "family"),
        "", "## By source", "", *_table(rows, "source"),
        "", "## The seed's claim: ResNet-50 training on a T4 vs a V100", "",
        "Seed: batch 128 took 45 min/epoch on a T4 and 18 on a V100 (2.5x); \"below batch 64 the T4 is within 10% "
        "of the V100\". gpuwise (shipped calibration; SGD-momentum, 224 px, eager; epoch = 1,281,167 ImageNet "
        "images, no input pipeline):", "",
        "| precision | batch | T4 img/s | V100 img/s | V100 / T4 | T4 min/epoch | V100 min/epoch | T4 bound |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in seed:
        t4, v = row.get("t4"), row.get("v100")
        if t4 is None or v is None:
            continue
        lines.append(
            f"| {row['precision']} | {row['batch']} | {t4.samples_per_s:.0f} | {v.samples_per_s:.0f} | "
            f"{v.samples_per_s / t4.samples_per_s:.2f} | {IMAGENET_TRAIN_IMAGES / t4.samples_per_s / 60:.0f} | "
            f"{IMAGENET_TRAIN_IMAGES / v.samples_per_s / 60:.0f} | {t4.bound} |")
    lines += ["", *_seed_discussion(seed), "",
              "## Calibration", "", f"`src/gpuwise/runtime/calibration.json`: {cal.source}", "",
              "| parameter | value |", "|---|---|",
              *[f"| {k} | {v:.4g} |" for k, v in cal.params.items()],
              *[f"| arch compute factor {k} | {v:.3f} |" for k, v in cal.arch_compute.items()],
              *[f"| arch memory factor {k} | {v:.3f} |" for k, v in cal.arch_memory.items()],
              "", "## Cases", "", "Per case: `benchmarks/results/time_cases.csv`.",
              ]
    if skipped:
        lines += ["", f"Skipped (could not be traced): {'; '.join(skipped)}"]
    (RESULTS / "time.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
