"""How well the one datasheet ratio (used by `report` and `advise` when no workload is known) predicts
the speed ratio between two GPUs, against Lambda's published single-GPU training throughputs.

Nothing is fitted: the ratio is the geometric mean of the peak-rate and bandwidth ratios
(`gpuwise.runtime.rates.datasheet_time_ratio`). Baselines on the same pairs: the arithmetic ½/½ blend
that `advise` used before the one-engine change, and the peak-rate ratio alone (the compute side of a
roofline; a full roofline needs a workload, which this ratio is used without). Every pair of catalog
GPUs with the same workload and precision label; error = predicted / measured time ratio − 1
(log-symmetric pairs are each counted once). Run: `python -m benchmarks.datasheet_ratio`.
"""

from __future__ import annotations

import csv
import itertools

from benchmarks.harness import (CELL_HEADER, DATA, Case, comparison_row, record_scoring, scored_words,
                                verdict, write_results)
from gpuwise.catalog import CatalogError, load_catalog, resolve_gpu
from gpuwise.runtime.rates import datasheet_time_ratio, peak_flops_per_s

SET = "datasheet ratio: Lambda GPU pairs"
PRECISION = {"fp16": "amp-fp16", "fp32": "tf32"}   # Lambda's 'fp32' runs TF32 on Ampere and newer
BLEND, PEAK = "arithmetic ½/½ blend (advise before)", "peak rate alone"


def cases() -> list[Case]:
    catalog = load_catalog(user_file=False)
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for r in csv.DictReader((DATA / "lambda_train.csv").open()):
        if r["num_gpus"] != "1" or r["precision_label"] not in PRECISION:
            continue
        try:
            gpu = resolve_gpu(catalog, r["gpu_entry"])
        except CatalogError:
            continue
        rows.setdefault((r["workload"], r["precision_label"]), {})[gpu.id] = float(r["throughput"])
    out = []
    for (workload, label), by_gpu in rows.items():
        precision = PRECISION[label]
        for a, b in itertools.combinations(sorted(by_gpu), 2):
            ga, gb = resolve_gpu(catalog, a), resolve_gpu(catalog, b)
            compute = peak_flops_per_s(ga, precision) / peak_flops_per_s(gb, precision)
            bandwidth = ga.memory_bandwidth_gbs / gb.memory_bandwidth_gbs
            out.append(Case(f"{workload}/{label}: {a} vs {b}", SET, "held-out",
                            predicted=datasheet_time_ratio(ga, gb, precision),
                            measured=by_gpu[a] / by_gpu[b],             # time on b / time on a
                            units="time ratio", baselines={BLEND: 0.5 * compute + 0.5 * bandwidth, PEAK: compute}))
    return out


def main() -> None:
    rows = cases()
    record_scoring(SET)
    lines = ["# The datasheet ratio between two GPUs", "",
             f"{len(rows)} GPU pairs from Lambda's single-GPU training throughputs "
             "(`shared/data/public-benchmarks/lambda_train.csv`; same workload and precision label). "
             f"Error = predicted / measured time ratio − 1. Nothing fitted ({scored_words(SET)}).", "",
             f"Cells: {CELL_HEADER}.", "",
             f"| pairs | n | geometric mean (shipped) | {BLEND} | {PEAK} |", "|---|---|---|---|---|",
             comparison_row("all", rows, (BLEND, PEAK)), "",
             verdict(rows, PEAK, "the geometric mean"), verdict(rows, BLEND, "the geometric mean")]
    write_results("datasheet_ratio", lines, {"set": SET, "cases": rows})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
