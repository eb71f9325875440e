"""How well the one datasheet ratio (used by `report` and `advise` when no workload is known) predicts
the speed ratio between two GPUs, against Lambda's published single-GPU training throughputs.

Nothing is fitted: the ratio is the geometric mean of the peak-rate and bandwidth ratios
(`gpuwise.runtime.rates.datasheet_time_ratio`). For comparison, the arithmetic ½/½ blend that `advise`
used before the one-engine change, and the peak-rate ratio alone. Every pair of catalog GPUs with the
same workload and precision label; error = predicted / measured time ratio − 1 (log-symmetric pairs
are each counted once). Run: `python benchmarks/datasheet_ratio.py` (writes results/datasheet_ratio.md).
"""

from __future__ import annotations

import csv
import itertools
import math
import statistics
from datetime import date
from pathlib import Path

from gpuwise.catalog import CatalogError, load_catalog, resolve_gpu
from gpuwise.runtime.rates import datasheet_time_ratio, peak_flops_per_s

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "public-benchmarks" / "lambda_train.csv"
OUT = Path(__file__).resolve().parent / "results" / "datasheet_ratio.md"
PRECISION = {"fp16": "amp-fp16", "fp32": "tf32"}   # Lambda's 'fp32' runs TF32 on Ampere and newer


def main() -> None:
    catalog = load_catalog(user_file=False)
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for r in csv.DictReader(DATA.open()):
        if r["num_gpus"] != "1" or r["precision_label"] not in PRECISION:
            continue
        try:
            gpu = resolve_gpu(catalog, r["gpu_entry"])
        except CatalogError:
            continue
        rows.setdefault((r["workload"], r["precision_label"]), {})[gpu.id] = float(r["throughput"])
    errors = {"geometric mean (shipped)": [], "arithmetic ½/½ blend (advise before)": [], "peak rate alone": []}
    for (workload, label), by_gpu in rows.items():
        precision = PRECISION[label]
        for a, b in itertools.combinations(sorted(by_gpu), 2):
            ga, gb = resolve_gpu(catalog, a), resolve_gpu(catalog, b)
            measured = by_gpu[a] / by_gpu[b]            # time on b / time on a
            compute = peak_flops_per_s(ga, precision) / peak_flops_per_s(gb, precision)
            bandwidth = ga.memory_bandwidth_gbs / gb.memory_bandwidth_gbs
            for name, predicted in (("geometric mean (shipped)", datasheet_time_ratio(ga, gb, precision)),
                                    ("arithmetic ½/½ blend (advise before)", 0.5 * compute + 0.5 * bandwidth),
                                    ("peak rate alone", compute)):
                errors[name].append(predicted / measured - 1.0)
    lines = [f"# The datasheet ratio between two GPUs ({date.today().isoformat()})", "",
             f"{len(next(iter(errors.values())))} GPU pairs from Lambda's single-GPU training throughputs "
             "(`shared/data/public-benchmarks/lambda_train.csv`; same workload and precision label). "
             "Error = predicted / measured time ratio − 1. Nothing fitted.", "",
             "| ratio | median \\|error\\| | p90 \\|error\\| | signed median |", "|---|---|---|---|"]
    for name, errs in errors.items():
        absolute = sorted(abs(e) for e in errs)
        p90 = absolute[min(len(absolute) - 1, math.ceil(0.9 * len(absolute)) - 1)]
        lines.append(f"| {name} | {statistics.median(absolute):.1%} | {p90:.1%} | {statistics.median(errs):+.1%} |")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
