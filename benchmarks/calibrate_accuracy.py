#!/usr/bin/env python3
"""How far a user's calibration carries: leave-one-out over the public measurements of one stack.

A "stack" is one source on one GPU (timm's inference runs on an RTX 4090 with PyTorch 2.4, Lambda's NGC
training runs on an H100, ...): what one user's runs on one machine look like. For every case of a stack,
the calibration of ``gpuwise.calibrate.fit`` (the code ``gpuwise calibrate`` runs) is fitted on the
stack's other cases — one other run at a time, and all of them — and predicts the held-out case. The
shipped model's error on the same case is the baseline. Signed error = (predicted − measured) / measured.

    python benchmarks/calibrate_accuracy.py      # writes results/calibrate.md and results/calibrate_cases.csv

Data: shared/data/public-benchmarks (time_cases.py); traces from benchmarks/cache (time_traces.py).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gpuwise.calibrate.fit import FitRow, class_key, fit_gpu  # noqa: E402
from gpuwise.runtime import predict_step_time  # noqa: E402
from time_cases import all_cases, split_of, write_csv  # noqa: E402
from time_traces import load_trace  # noqa: E402

RESULTS = Path(__file__).parent / "results"
MIN_CASES = 4


def _row(name: str, step, measured_s: float, precision: str, gpu) -> FitRow:
    by_class = {class_key(c, precision, gpu): s for c, s in step.by_class_s.items()}
    return FitRow(name, by_class, max(0.0, step.step_time_s - sum(by_class.values())), measured_s)


def _calibrated_s(rows: list[FitRow], held: FitRow) -> float:
    cal = fit_gpu("x", rows)
    return sum(cal.factor(c) * s for c, s in held.predicted_by_class_s.items()) + cal.host_s + held.predicted_other_s


def _stats(errors: list[float]) -> str:
    a = sorted(abs(e) for e in errors)
    p90 = a[min(len(a) - 1, int(0.9 * len(a)))]
    return (f"median \\|err\\| {statistics.median(a):.1%}, p90 {p90:.1%}, worst {a[-1]:.1%}, "
            f"signed median {statistics.median(errors):+.1%}")


def main() -> None:
    t0 = time.time()
    stacks: dict[tuple[str, str], list[tuple[str, FitRow, str]]] = defaultdict(list)
    skipped = 0
    for c in all_cases():
        if split_of(c) in ("unused", "fresh"):
            continue
        try:
            trace = load_trace(c.key)
        except Exception:
            skipped += 1
            continue
        measured_s = c.key.batch_size / c.measured_samples_per_s
        stacks[(c.source, c.gpu.id)].append((c.name, _row(c.name, predict_step_time(trace, c.gpu), measured_s,
                                                          c.key.precision, c.gpu), c.family))
    out = []
    for (source, gpu), cases in sorted(stacks.items()):
        if len(cases) < MIN_CASES:
            continue
        for i, (name, held, family) in enumerate(cases):
            others = [r for j, (_, r, _) in enumerate(cases) if j != i]
            meas = held.measured_step_time_s
            shipped = (held.predicted_step_time_s - meas) / meas
            one = statistics.median((_calibrated_s([r], held) - meas) / meas for r in others)
            one_same = [(_calibrated_s([r], held) - meas) / meas for (_, r, f) in
                        [cases[j] for j in range(len(cases)) if j != i] if f == family]
            all_err = (_calibrated_s(others, held) - meas) / meas
            out.append({"case": name, "stack": f"{source}@{gpu}", "family": family, "runs": len(others),
                        "err_shipped": shipped, "err_one_run": one,
                        "err_one_run_same_family": statistics.median(one_same) if one_same else None,
                        "err_all_other_runs": all_err})
    write_csv(RESULTS / "calibrate_cases.csv", out)
    lines = ["# Calibration by the user's own runs: leave-one-out on public measurements",
             "", f"Measured 2026-12-03 by `benchmarks/calibrate_accuracy.py` in {time.time() - t0:.0f} s "
             f"({len(out)} cases in {len({r['stack'] for r in out})} stacks of ≥ {MIN_CASES} cases; {skipped} "
             "cases without a trace skipped). Each case is predicted by the shipped model, then by the "
             "calibration fitted on one other run of the same stack (median over the choices of that run; "
             "and over runs of the same model family only), then on all other runs of the stack.", "",
             "| stack | cases | shipped | 1 other run | 1 other run, same family | all other runs |", "|---|---|---|---|---|---|"]
    groups = defaultdict(list)
    for r in out:
        groups[r["stack"]].append(r)
    groups["all"] = out
    for stack, rows in groups.items():
        same = [r["err_one_run_same_family"] for r in rows if r["err_one_run_same_family"] is not None]
        lines.append(f"| {stack} | {len(rows)} | {_stats([r['err_shipped'] for r in rows])} | "
                     f"{_stats([r['err_one_run'] for r in rows])} | {_stats(same) if same else '-'} | "
                     f"{_stats([r['err_all_other_runs'] for r in rows])} |")
    lines += ["", "Per case: [calibrate_cases.csv](calibrate_cases.csv)."]
    (RESULTS / "calibrate.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
