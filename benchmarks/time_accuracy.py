"""How well gpuwise predicts step time on GPUs AND model families it was not fitted on.

    python -m benchmarks.time_accuracy     # writes benchmarks/results/time.md (+ .json, time_cases.csv,
                                           # time_accuracy.png) and src/gpuwise/runtime/time_accuracy.json

Protocol (benchmarks/README.md, frozen 2026-12-03 before tuning): the shipped calibration was fitted
on the training side of the split (``fit_time_calibration.py``); every case whose GPU and family
are both held out is scored here with exactly that calibration and the shipped per-kernel laws.
Next to it, on the same rows: a plain roofline (datasheet peak of the precision the kernels run in,
datasheet bandwidth, per operator, no launch cost) and roofline / 0.75.
Error = predicted step time / measured step time - 1 (signed and absolute). Each run scores the three
held-out sets (test side, fresh check, wider set) once: the ledger's count is printed beside each.
``time_accuracy.json`` (what ``estimate`` shows as a likely range) is rewritten by every run: it is
this benchmark's figure, by regime, with llm-foundry's MPT training runs (``llm_train_time``, held out whole)
as the LLM closed form's training steps' (README.md, "Seventeenth session"), and Lambda's multi-GPU runs on
``multi_gpu_accuracy``'s held-out systems as multi-GPU step times (README.md, "Nineteenth session"), and timm's
``-dynamo`` rows of ``time_stack``'s compile pairs (held-out families) as torch.compile inference steps (README.md,
"Twentieth session"); they score those sets once too.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from datetime import date

import numpy as np

from benchmarks import llm_train_time, multi_gpu_accuracy, time_stack
from benchmarks.baselines import roofline_step_s
from benchmarks.harness import (CELL_HEADER, REPO, RESULTS, ROOFLINE, ROOFLINE_075, SPEEDUP_N, Case, comparison_row,
                                record_scoring, scored_words, summarize, verdict, write_results)
from benchmarks.time_cases import (HELD_OUT_FAMILIES, HELD_OUT_GPUS, TRAINING_GPUS, all_cases, gpu_specs, split_of,
                                   write_csv)
from benchmarks.time_traces import TraceKey, load_trace
from gpuwise.runtime import predict_step_time
from gpuwise.runtime.accuracy import REGIMES
from gpuwise.runtime.calibration import Calibration, load_calibration
from gpuwise.runtime.laws import load_laws

ACCURACY_PATH = REPO / "src" / "gpuwise" / "runtime" / "time_accuracy.json"
IMAGENET_TRAIN_IMAGES = 1_281_167
# The held-out sets this script scores (time_cases.split_of's labels -> the ledger's names).
SETS = {"test": "time end-to-end: test side", "fresh": "time end-to-end: fresh check",
        "wider": "time end-to-end: wider set"}
MULTI_GPU_SET = "multi-GPU step time: held-out systems"   # README.md, "Nineteenth session"
COMPILED_SET = "compiled step time: held-out pairs"      # README.md, "Twentieth session"
EAGER = "gpuwise's eager step"
ONE_GPU_N = f"gpuwise's 1-GPU step, {SPEEDUP_N}"
# Issue 16's figure for eager PyTorch ResNet-50 inference at batch 1 on V100/T4-class GPUs.
PUBLISHED_BS1_MS = (10.0, 13.0)


def signed(pred_s: float, meas_s: float) -> float:
    return pred_s / meas_s - 1


def summary(errors: list[float]) -> str:
    """The harness's cell: median / p90 / worst of |error| (signed median, share low, n)."""
    return summarize(errors).cell()


def as_cases(rows: list[dict]) -> list[Case]:
    """The harness's cases of scored rows (the model and roofline / 0.75 on the same rows)."""
    return [Case(r["case"], SETS.get(r["split"], r["split"]), r["split"], r["predicted_step_s"], r["measured_step_s"],
                 "s", {ROOFLINE_075: r["roofline_step_s"] / 0.75}) for r in rows]


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


def small_batch_rows() -> list[dict]:
    """ResNet-50 fp32 inference at batch 1-16 on a V100 and a T4 (eager, the real tracer)."""
    from gpuwise.catalog import load_catalog, resolve_gpu
    from gpuwise.trace import trace_workload
    from gpuwise.workload import Workload

    cat = load_catalog(user_file=False)
    rows = []
    for batch in (1, 2, 4, 8, 16):
        tr = trace_workload(Workload(model="torchvision:resnet50", batch_size=batch, mode="infer",
                                     optimizer="none", precision="fp32"))
        for gid in ("v100-16gb-sxm2", "t4"):
            st = predict_step_time(tr, resolve_gpu(cat, gid))
            rows.append({"batch": batch, "gpu": gid, "step": st})
    return rows


def main() -> None:
    t0 = time.time()
    cal = load_calibration()
    rows, skipped = [], []
    for c in all_cases():
        split = split_of(c)
        if split == "unused":
            continue
        try:
            tr = load_trace(c.key)
        except Exception as e:  # a model the stand-in cannot trace: reported, not scored
            skipped.append(f"{c.name}: {type(e).__name__}")
            continue
        meas = c.key.batch_size / c.measured_samples_per_s
        step = predict_step_time(tr, c.gpu, calibration=cal)
        pred = step.step_time_s
        roof = roofline_step_s(tr, c.gpu)
        rows.append({
            "case": c.name, "split": split, "source": c.source, "gpu": c.gpu.id, "arch": c.gpu.arch,
            "family": c.family, "kind": c.kind, "mode": c.key.mode, "precision": c.key.precision,
            "batch": c.key.batch_size, "measured_samples_per_s": c.measured_samples_per_s,
            "measured_step_s": meas, "predicted_step_s": pred, "roofline_step_s": roof,
            "err": signed(pred, meas), "err_roofline": signed(roof, meas), "err_roofline_075": signed(roof / 0.75, meas),
            "note": c.note, "regime": step.regime,
        })
    assert {r["gpu"] for r in rows if r["split"] == "train"} == set(TRAINING_GPUS), "time_cases.TRAINING_GPUS is stale"
    print(f"{len(rows)} cases scored, {len(skipped)} skipped, {time.time() - t0:.0f} s", flush=True)
    for split in SETS:
        record_scoring(SETS[split])
    write_csv(RESULTS / "time_cases.csv", rows)
    small = small_batch_rows()
    seed = seed_claims(cal)
    _figure([r for r in rows if r["split"] == "test"])
    llm_cases, llm_detail, _ = llm_train_time.score_rows()    # held out whole (README.md, "Seventeenth session")
    record_scoring(llm_train_time.HELD_OUT_SET)
    multi = multi_gpu_cases(multi_gpu_accuracy.step_time_rows())    # README.md, "Nineteenth session"
    record_scoring(MULTI_GPU_SET)
    compiled = compiled_cases(time_stack.compiled_step_rows())       # README.md, "Twentieth session"
    record_scoring(COMPILED_SET)
    accuracy = _write_accuracy([r for r in rows if is_held_out(r)]
                               + [{"err": c.error, "regime": d["regime"]} for c, d in zip(llm_cases, llm_detail)]
                               + [{"err": c.error, "regime": row["regime"]} for c, row in multi + compiled])
    lines = (_markdown(rows, small, seed, skipped, time.time() - t0) + _multi_gpu_section(multi)
             + _compiled_section(compiled))
    by_split = {split: summarize(r["err"] for r in rows if r["split"] == split) for split in ("test", "train", *SETS)}
    write_results("time_accuracy", lines, {
        "sets": SETS, "summaries": by_split, "regimes": accuracy["regimes"], "skipped": skipped,
        "multi_gpu_cases": [c for c, _ in multi], "compiled_cases": [c for c, _ in compiled],
        "cases": [{k: v for k, v in r.items()} for r in rows]})
    print("\n".join(lines))


def _table(rows, key: str) -> list[str]:
    groups = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    out = [f"| {key} | cases | gpuwise | roofline | roofline / 0.75 |", "|---|---|---|---|---|"]
    for name, rs in sorted(groups.items()):
        out.append(f"| {name} | {len(rs)} | {summary([r['err'] for r in rs])} | "
                   f"{summary([r['err_roofline'] for r in rs])} | {summary([r['err_roofline_075'] for r in rs])} |")
    return out


def _figure(rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, col, title in ((axes[0], "predicted_step_s", "gpuwise (GPU and family held out)"),
                           (axes[1], "roofline_step_s", "plain roofline (datasheet)")):
        for kind, marker in (("cnn", "o"), ("transformer", "^")):
            rs = [r for r in rows if r["kind"] == kind]
            ax.scatter([r["measured_step_s"] for r in rs], [r[col] for r in rs], s=14, marker=marker,
                       alpha=0.7, label=kind)
        lims = [min(r["measured_step_s"] for r in rows) / 2, max(r["measured_step_s"] for r in rows) * 2]
        ax.plot(lims, lims, "k-", lw=0.8)
        ax.plot(lims, [x * 1.2 for x in lims], "k:", lw=0.6)
        ax.plot(lims, [x / 1.2 for x in lims], "k:", lw=0.6)
        ax.set(xscale="log", yscale="log", xlabel="measured step time (s)", ylabel="predicted step time (s)",
               title=title)
        ax.legend()
    fig.suptitle(f"Step time on the held-out side: prediction vs public measurements ({len(rows)} cases)")
    fig.tight_layout()
    fig.savefig(RESULTS / "time_accuracy.png", dpi=110)


def _targets(test) -> list[str]:
    s = summarize(r["err"] for r in test)
    met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    return [
        f"- Median {100 * s.median_abs:.1f}% (target <= 8%: {met(s.median_abs <= 0.08)}); p90 {100 * s.p90_abs:.1f}% "
        f"(target <= 20%: {met(s.p90_abs <= 0.20)}); worst {100 * s.worst_abs:.1f}% "
        f"(target <= 50%: {met(s.worst_abs <= 0.5)}).",
        f"- {verdict(as_cases(test), ROOFLINE_075)}",
    ]


def _fresh_section(fresh) -> list[str]:
    """The fresh check (benchmarks/README.md): a GPU no fit or score had seen, scored once."""
    if not fresh:
        return []
    test = [r for r in fresh if r["family"] in HELD_OUT_FAMILIES]
    rest = [r for r in fresh if r["family"] not in HELD_OUT_FAMILIES]
    gpus = ", ".join(sorted({r["gpu"] for r in fresh}))
    row = lambda name, rs: (f"| {name} | {len(rs)} | {summary([r['err'] for r in rs])} | "  # noqa: E731
                            f"{summary([r['err_roofline'] for r in rs])} | "
                            f"{summary([r['err_roofline_075'] for r in rs])} |")
    return [
        f"## Fresh check: {gpus}, a GPU no fit or score had seen ({scored_words(SETS['fresh'])})",
        "",
        "timm's eager AMP inference file for this GPU (PyTorch 2.9.1, CUDA 13.0) was read for the first time by "
        "its first run, with the shipped calibration and kernel laws; nothing was changed after it (protocol: "
        "benchmarks/README.md, which also says where the GPU's specs come from).", "",
        "| rows | cases | gpuwise | roofline | roofline / 0.75 |", "|---|---|---|---|---|",
        row("held-out families (the protocol's test side, new GPU)", test),
        row("training families (new GPU only)", rest),
        row("all", fresh),
        "", "Targets (issue 16) on the held-out families of the new GPU:", "", *(_targets(test) if test else []),
        "", *_table(fresh, "family"),
        "", "| case | measured samples/s | predicted / measured |", "|---|---|---|",
        *[f"| {r['case']} | {r['measured_samples_per_s']:.0f} | {1 + r['err']:.2f} |"
          for r in sorted(fresh, key=lambda r: -abs(r["err"]))[:8]],
    ]


def is_held_out(row: dict) -> bool:
    """Held out in GPU and family: the test side, the wider set and the fresh GPU's held-out families."""
    return row["split"] in ("test", "wider") or (row["split"] == "fresh" and row["family"] in HELD_OUT_FAMILIES)


def _step_time_cases(rows: list[dict], set_name: str, own: str, own_key: str) -> list[tuple[Case, dict]]:
    """Step-time rows as the harness's cases (beside roofline, roofline / 0.75 and ``own``, the row's
    ``own_key`` figure: gpuwise's own baseline of that set), each with its row."""
    return [(Case(r["case"], set_name, "test", r["predicted_step_s"], r["measured_step_s"], "s",
                  {ROOFLINE: r["roofline_step_s"], ROOFLINE_075: r["roofline_step_s"] / 0.75, own: r[own_key]}), r)
            for r in rows]


def multi_gpu_cases(rows: list[dict]) -> list[tuple[Case, dict]]:
    """The multi-GPU step-time rows, beside gpuwise's own 1-GPU step with speed-up = N."""
    return _step_time_cases(rows, MULTI_GPU_SET, ONE_GPU_N, "one_gpu_step_s")


def compiled_cases(rows: list[dict]) -> list[tuple[Case, dict]]:
    """The compiled step-time rows, beside gpuwise's eager step of the same trace."""
    return _step_time_cases(rows, COMPILED_SET, EAGER, "eager_step_s")


def _step_time_section(title: str, intro: str, set_name: str, scored: list[tuple[Case, dict]], own: str,
                       by: tuple[str, ...]) -> list[str]:
    """A step-time set's section: its cases beside roofline, roofline / 0.75 and ``own``, all and by each of the
    rows' keys ``by``, and the two verdicts."""
    cases = [c for c, _ in scored]
    baselines = (ROOFLINE, ROOFLINE_075, own)
    groups = [comparison_row(f"{value}{suffix}", [c for c, row in scored if row[key] == value], baselines)
              for key, suffix in by for value in sorted({row[key] for _, row in scored})]
    return ["", f"## {title}", "", f"{intro} {set_name}: {scored_words(set_name)}.", "",
            "| rows | cases | gpuwise | " + " | ".join(baselines) + " |", "|---|---|---|" + "---|" * len(baselines),
            comparison_row("all", cases, baselines), *groups, "",
            verdict(cases, ROOFLINE_075), "", verdict(cases, own)]


def _multi_gpu_section(multi: list[tuple[Case, dict]]) -> list[str]:
    """The multi-GPU step-time set (README.md, "Nineteenth session"): what the multi-GPU range is made of."""
    return _step_time_section(
        "Multi-GPU step time (the multi-GPU range)",
        "Lambda's data-parallel runs on 2, 4 and 8 GPUs of one system (`lambda_train_multi.csv`), the systems "
        "`multi_gpu_accuracy.py` holds out, as step times: measured = N x per-GPU batch / total throughput; "
        "predicted = `predict_step_time(count=N)` over the system's links, as `estimate --num-gpus N`. Nothing "
        "fitted on them.", MULTI_GPU_SET, multi, ONE_GPU_N, (("count", " GPUs"),))


def _compiled_section(compiled: list[tuple[Case, dict]]) -> list[str]:
    """The compiled step-time set (README.md, "Twentieth session"): what the compiled range is made of."""
    return _step_time_section(
        "torch.compile step time (the compiled range)",
        "timm's `-dynamo` inference files on the RTX 4090 (held out) and the RTX PRO 6000 Max-Q (fresh), the "
        "held-out families only, each model at its smallest size >= 224 px: measured = the file's batch / its "
        "throughput; predicted = `predict_step_time` of the trace with `compile` set, as `estimate --mode infer "
        "--compile`. Nothing fitted on them.", COMPILED_SET, compiled, EAGER, (("gpu", ""), ("family", "")))


def _write_accuracy(held: list[dict]) -> dict:
    """The shipped model's error on every held-out run, per regime of the prediction (runtime/accuracy.py):
    what estimate shows beside a step time of that regime. Every regime is written with its count; one
    with fewer than ``MIN_CASES`` runs gives no range."""
    assert held, "no held-out rows: nothing to ship as the model's error"
    regimes = {}
    for regime in REGIMES:
        rows = [r for r in held if r["regime"] == regime]
        if not rows:
            regimes[regime] = {"cases": 0}
            continue
        s = summarize(r["err"] for r in rows)
        ratio = 1 + np.array([r["err"] for r in rows])
        # The likely range (runtime/accuracy.py): the 10th-90th percentile of predicted / measured, as shipped.
        regimes[regime] = {
            "cases": len(rows), "median_abs_error": round(s.median_abs, 4), "p90_abs_error": round(s.p90_abs, 4),
            "signed_median_error": round(s.signed_median, 4),
            "ratio_q10": round(float(np.quantile(ratio, 0.1)), 4), "ratio_q90": round(float(np.quantile(ratio, 0.9)), 4)}
    doc = {"date": date.today().isoformat(), "source": "benchmarks/time_accuracy.py: published runs held out in GPU and model family "
           "(test side, wider set, fresh check's held-out families; benchmarks/README.md), and llm-foundry's MPT "
           "training runs, held out whole (benchmarks/llm_train_time.py), and Lambda's multi-GPU runs on the held-out systems "
           "(benchmarks/multi_gpu_accuracy.py), and timm's -dynamo rows of the held-out families (benchmarks/time_stack.py), "
           "by regime",
           "regimes": regimes}
    ACCURACY_PATH.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def _wider_section(wider) -> list[str]:
    """Third session's wider held-out set (benchmarks/README.md): held-out families on GPUs that are
    neither listed as held out nor have a training case."""
    if not wider:
        return []
    gpus = ", ".join(sorted({r["gpu"] for r in wider}))
    return [
        f"## Wider held-out set: Lambda's ResNet-50 and BERT on the unlisted GPUs ({scored_words(SETS['wider'])})", "",
        f"GPUs: {gpus}. Held out in GPU and family (no training case on these GPUs, families held out); "
        "defined before it was first scored (benchmarks/README.md, third session).", "",
        "| rows | cases | gpuwise | roofline | roofline / 0.75 |", "|---|---|---|---|---|",
        f"| all | {len(wider)} | {summary([r['err'] for r in wider])} | {summary([r['err_roofline'] for r in wider])} | "
        f"{summary([r['err_roofline_075'] for r in wider])} |",
        "", "Targets (issue 16) on this set:", "", *_targets(wider),
        "", *_table(wider, "gpu"), "", *_table(wider, "family"), "", *_table(wider, "precision"),
        "", "| case | measured samples/s | predicted / measured | note |", "|---|---|---|---|",
        *[f"| {r['case']} | {r['measured_samples_per_s']:.0f} | {1 + r['err']:.2f} | {r['note']} |"
          for r in sorted(wider, key=lambda r: -abs(r["err"]))[:10]],
    ]


def _markdown(rows, small, seed, skipped, secs) -> list[str]:
    cal = load_calibration()
    test = [r for r in rows if r["split"] == "test"]
    train = [r for r in rows if r["split"] == "train"]
    lines = [
        "# Time predictor accuracy", "",
        f"Script: `benchmarks/time_accuracy.py` ({secs:.0f} s on this machine, traces "
        "cached in `benchmarks/cache/`). Data: `shared/data/public-benchmarks/` (lambda_train.csv; timm RTX 3090 "
        "training PT 1.12; timm inference RTX 3090/4090 PT 2.4, RTX 5090 and (fresh check) RTX PRO 6000 Max-Q PT 2.9.1; all eager). Protocol "
        "(frozen before tuning): `benchmarks/README.md`. Held-out GPUs: " + ", ".join(HELD_OUT_GPUS)
        + "; held-out families: " + ", ".join(HELD_OUT_FAMILIES) + ". **Test side** = both held out "
        f"({len(test)} cases); training side = neither ({len(train)} cases, what `calibration.json` was fitted on); "
        "the rest is used for nothing.", "",
        f"Error = predicted / measured step time - 1; cells: {CELL_HEADER}. "
        "Roofline: datasheet peak of the precision the kernels run in and datasheet bandwidth, per operator, "
        "no efficiency, no launch cost.", "",
        "![prediction vs measurement](time_accuracy.png)", "",
        "## Summary", "",
        "| side | cases | gpuwise | roofline | roofline / 0.75 |", "|---|---|---|---|---|",
        f"| **test (held out; {scored_words(SETS['test'])})** | {len(test)} | {summary([r['err'] for r in test])} | "
        f"{summary([r['err_roofline'] for r in test])} | {summary([r['err_roofline_075'] for r in test])} |",
        f"| training (in-sample) | {len(train)} | {summary([r['err'] for r in train])} | "
        f"{summary([r['err_roofline'] for r in train])} | {summary([r['err_roofline_075'] for r in train])} |",
        "", "Targets (issue 16), test side:", "", *_targets(test),
        "", "## Test side by source", "", *_table(test, "source"),
        "", "## Test side by GPU", "", *_table(test, "gpu"),
        "", "## Test side by family", "", *_table(test, "family"),
        "", "## Test side by precision", "", *_table(test, "precision"),
        "", "## Worst test cases", "", "| case | measured samples/s | predicted / measured | note |", "|---|---|---|---|",
        *[f"| {r['case']} | {r['measured_samples_per_s']:.0f} | {1 + r['err']:.2f} | {r['note']} |"
          for r in sorted(test, key=lambda r: -abs(r["err"]))[:10]],
        "", *_fresh_section([r for r in rows if r["split"] == "fresh"]),
        "", *_wider_section([r for r in rows if r["split"] == "wider"]),
        "", "## Small batches: ResNet-50 fp32 inference, eager (real tracer)", "",
        f"Published eager PyTorch latency at batch 1 on V100/T4-class GPUs: {PUBLISHED_BS1_MS[0]:.0f}-"
        f"{PUBLISHED_BS1_MS[1]:.0f} ms (issue 16's figure). Target: within 20% at batch 1-16.", "",
        "| batch | GPU | predicted ms | bound | GPU waits for host (ms) | kernels |", "|---|---|---|---|---|---|",
        *[f"| {r['batch']} | {r['gpu']} | {r['step'].step_time_s * 1e3:.2f} | {r['step'].bound} | "
          f"{r['step'].by_class_s.get('launch', 0) * 1e3:.2f} | {r['step'].kernel_launches} |" for r in small],
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
    laws = load_laws()
    lines += ["", "## Calibration and laws", "", f"`src/gpuwise/runtime/calibration.json`: {cal.source}", "",
              "| parameter | value |", "|---|---|", *[f"| {k} | {v:.4g} |" for k, v in cal.params.items()], "",
              f"`src/gpuwise/runtime/kernel_laws.json`: {laws.source}; held-out-GPU error per kernel in "
              "[time_kernels.md](time_kernels.md).", "",
              "## Cases", "", "Per case (both sides): `benchmarks/results/time_cases.csv`."]
    if skipped:
        lines += ["", f"Skipped (could not be traced): {'; '.join(skipped)}"]
    return lines


if __name__ == "__main__":
    main()
