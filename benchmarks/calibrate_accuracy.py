#!/usr/bin/env python3
"""How far a user's calibration carries: leave-one-out over the public measurements of one stack.

A "stack" is one source on one GPU (timm's inference runs on an RTX 4090 with PyTorch 2.4, Lambda's NGC
training runs on an H100, ...): what one user's runs on one machine look like. For every case of a stack,
the calibration of ``gpuwise.calibrate.fit`` (the code ``gpuwise calibrate`` runs) is fitted on the
stack's other cases — one other run at a time, and all of them — and predicts the held-out case. The
shipped model's error on the same case is the baseline. Signed error = (predicted − measured) / measured.

    python -m benchmarks.calibrate_accuracy    # writes results/calibrate.md (+ .json) and results/calibrate_cases.csv

Baselines on the same rows: the plain roofline, roofline / 0.75, and the roofline times one constant
fitted on the same other runs (the median measured / roofline ratio): the one-constant model given the
user's runs. Data: shared/data/public-benchmarks (time_cases.py); traces from benchmarks/cache
(time_traces.py). The shipped model's column reads the time benchmark's test and wider rows too, so
a run counts as a scoring of those sets in the ledger.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from benchmarks.baselines import roofline_baselines
from benchmarks.harness import (CELL_HEADER, RESULTS, ROOFLINE, ROOFLINE_075, Case, comparison_row,
                                record_scoring, scored_words, summarize, verdict, write_results)
from benchmarks.time_cases import all_cases, split_of, write_csv
from benchmarks.time_traces import load_trace
from gpuwise.calibrate.fit import FitRow, class_key, fit_gpu
from gpuwise.runtime import predict_step_time

MIN_CASES = 4
SET = "calibrate: leave-one-out within a stack"
CARRIED_SET = "calibrate: carried to another GPU"   # benchmarks/README.md, fifteenth session
# time_accuracy's held-out splits whose rows the shipped column reads (time_cases.split_of's labels).
TIME_SETS = {"test": "time end-to-end: test side", "wider": "time end-to-end: wider set"}
SHIPPED, FITTED_ROOFLINE = "shipped model", "roofline x one constant of the other runs"


def _row(name: str, step, measured_s: float, precision: str, gpu) -> FitRow:
    by_class = {class_key(c, precision, gpu): s for c, s in step.by_class_s.items()}
    return FitRow(name, by_class, max(0.0, step.step_time_s - sum(by_class.values())), measured_s,
                  predicted_host_s=step.host_s)


def _calibrated_s(rows: list[FitRow], held: FitRow) -> float:
    """What `gpuwise estimate` gives the held-out case under the calibration of ``rows`` (``fit.compose``)."""
    return fit_gpu("x", rows).step_time_s(held)


def main() -> None:
    t0 = time.time()
    stacks: dict[tuple[str, str], list[tuple[str, FitRow, str, float, str]]] = defaultdict(list)
    skipped = 0
    for c in all_cases():
        split = split_of(c)
        if split in ("unused", "fresh"):
            continue
        try:
            trace = load_trace(c.key)
        except Exception:
            skipped += 1
            continue
        measured_s = c.key.batch_size / c.measured_samples_per_s
        row = _row(c.name, predict_step_time(trace, c.gpu), measured_s, c.key.precision, c.gpu)
        stacks[(c.source, c.gpu.id)].append((c.name, row, c.family, roofline_baselines(trace, c.gpu)[ROOFLINE], split))
    out, scored = [], []
    for (source, gpu), runs in sorted(stacks.items()):
        if len(runs) < MIN_CASES:
            continue
        for i, (name, held, family, roof_s, split) in enumerate(runs):
            others = [run for j, run in enumerate(runs) if j != i]
            meas = held.measured_step_time_s
            one = statistics.median((_calibrated_s([r], held) - meas) / meas for _, r, *_ in others)
            one_same = [(_calibrated_s([r], held) - meas) / meas for _, r, f, *_ in others if f == family]
            constant = statistics.median(r.measured_step_time_s / o_roof for _, r, _, o_roof, _ in others)
            case = Case(name, SET, split, _calibrated_s([r for _, r, *_ in others], held), meas, "s",
                        {SHIPPED: held.predicted_step_time_s, ROOFLINE: roof_s, ROOFLINE_075: roof_s / 0.75,
                         FITTED_ROOFLINE: roof_s * constant})
            scored.append((f"{source}@{gpu}", case))
            out.append({"case": name, "stack": f"{source}@{gpu}", "family": family, "split": split,
                        "runs": len(others), "err_shipped": case.baseline_error(SHIPPED), "err_one_run": one,
                        "err_one_run_same_family": statistics.median(one_same) if one_same else None,
                        "err_all_other_runs": case.error, "err_roofline_075": case.baseline_error(ROOFLINE_075),
                        "err_roofline_fitted": case.baseline_error(FITTED_ROOFLINE)})
    carried = _carried_cases(stacks)
    record_scoring(SET)
    if carried:
        record_scoring(CARRIED_SET)
    for split, name in TIME_SETS.items():
        if any(c.split == split for _, c in scored):
            record_scoring(name)
    write_csv(RESULTS / "calibrate_cases.csv", out)
    cases = [c for _, c in scored]
    variants = (SHIPPED, ROOFLINE, ROOFLINE_075, FITTED_ROOFLINE)
    lines = ["# Calibration by the user's own runs: leave-one-out on public measurements", "",
             f"Measured by `benchmarks/calibrate_accuracy.py` in {time.time() - t0:.0f} s "
             f"({len(out)} cases in {len({r['stack'] for r in out})} stacks of ≥ {MIN_CASES} cases; {skipped} "
             "cases without a trace skipped; " + scored_words(SET) + "). Each case is predicted by the shipped "
             "model, then by the calibration fitted on one other run of the same stack (median over the choices "
             "of that run; and over runs of the same model family only), then on all other runs of the stack. "
             f"Baselines on the same rows: plain roofline, roofline / 0.75, and the {FITTED_ROOFLINE} (the median "
             "measured / roofline ratio of the stack's other runs).", "",
             f"Cells: {CELL_HEADER}.", "",
             "## All stacks", "",
             "| predicted by | all cases |", "|---|---|",
             f"| calibrated on all other runs | {summarize_col(out, 'err_all_other_runs')} |",
             f"| calibrated on 1 other run | {summarize_col(out, 'err_one_run')} |",
             f"| calibrated on 1 other run, same family | {summarize_col(out, 'err_one_run_same_family')} |",
             *[f"| {v} | {summarize_col_cases(cases, v)} |" for v in variants], "",
             verdict(cases, ROOFLINE_075, "the calibration on all other runs"),
             verdict(cases, FITTED_ROOFLINE, "the calibration on all other runs"), "",
             "## By stack: calibrated on all other runs, beside the baselines", "",
             "| stack | cases | calibrated on all other runs | " + " | ".join(variants) + " |",
             "|---|---|---|" + "---|" * len(variants)]
    groups = defaultdict(list)
    for stack, c in scored:
        groups[stack].append(c)
    lines += [comparison_row(stack, cs, variants) for stack, cs in groups.items()]
    lines += ["", "## By stack: one other run", "", "| stack | cases | 1 other run | 1 other run, same family |",
              "|---|---|---|---|"]
    by_stack = defaultdict(list)
    for r in out:
        by_stack[r["stack"]].append(r)
    lines += [f"| {stack} | {len(rows)} | {summarize_col(rows, 'err_one_run')} | "
              f"{summarize_col(rows, 'err_one_run_same_family')} |" for stack, rows in by_stack.items()]
    lines += _carried_lines(carried)
    lines += ["", "Per case: [calibrate_cases.csv](calibrate_cases.csv)."]
    write_results("calibrate_accuracy", lines, {"set": SET, "cases": cases,
                                                "carried": {"set": CARRIED_SET, "cases": [c for _, c in carried]}})
    print("\n".join(lines))


def _carried_cases(stacks) -> list[tuple[str, Case]]:
    """Every case of a stack S@B predicted by the calibration fitted on all runs of S@A, for every other GPU A of
    the same source with at least ``MIN_CASES`` runs (what a user who calibrated on A sees on B: the GPU without
    a calibration carries A's, ``calibrate.apply.carried_calibration``). Baselines: the shipped model on B, the
    roofline / 0.75 and the roofline times the one constant of S@A's runs."""
    out = []
    for (source, gpu_a), runs_a in sorted(stacks.items()):
        if len(runs_a) < MIN_CASES:
            continue
        cal = fit_gpu(gpu_a, [r for _, r, *_ in runs_a])
        constant = statistics.median(r.measured_step_time_s / roof for _, r, _, roof, _ in runs_a)
        for (source_b, gpu_b), runs_b in sorted(stacks.items()):
            if source_b != source or gpu_b == gpu_a:
                continue
            for name, held, _family, roof_s, split in runs_b:
                out.append((f"{source}: {gpu_a} -> {gpu_b}", Case(
                    name, CARRIED_SET, split, cal.step_time_s(held), held.measured_step_time_s, "s",
                    {SHIPPED: held.predicted_step_time_s, ROOFLINE: roof_s, ROOFLINE_075: roof_s / 0.75,
                     FITTED_ROOFLINE: roof_s * constant})))
    return out


def _carried_lines(carried: list[tuple[str, Case]]) -> list[str]:
    if not carried:
        return []
    cases = [c for _, c in carried]
    variants = (SHIPPED, ROOFLINE_075, FITTED_ROOFLINE)
    by_source = defaultdict(list)
    for pair, c in carried:
        by_source[pair.split(":")[0]].append(c)
    return ["", "## Carried to another GPU (calibrated on all runs of one GPU, predicting the same source's runs on "
            "another)", "",
            f"Protocol: benchmarks/README.md, fifteenth session ({scored_words(CARRIED_SET)}). Each (source, GPU A, "
            f"GPU B) with ≥ {MIN_CASES} runs on A: the calibration fitted on all of A's runs predicts each run on B, "
            "as `estimate` does for a GPU without a calibration of its own. Pooled over "
            f"{len({p for p, _ in carried})} pairs of GPUs.", "",
            "| rows | cases | carried calibration | " + " | ".join(variants) + " |",
            "|---|---|---|" + "---|" * len(variants),
            comparison_row("all pairs", cases, variants),
            *[comparison_row(source, cs, variants) for source, cs in sorted(by_source.items())], "",
            verdict(cases, SHIPPED, "the carried calibration"),
            verdict(cases, ROOFLINE_075, "the carried calibration"),
            verdict(cases, FITTED_ROOFLINE, "the carried calibration")]


def summarize_col(rows: list[dict], key: str) -> str:
    return summarize(r[key] for r in rows if r[key] is not None).cell()


def summarize_col_cases(cases: list[Case], baseline: str) -> str:
    return summarize(c.baseline_error(baseline) for c in cases).cell()


if __name__ == "__main__":
    main()
