"""Does the software stack move time as much as it does on real GPUs? Channels-last and torch.compile.

    python -m benchmarks.time_stack     # writes benchmarks/results/time_stack.md (+ .json)

timm publishes the same inference benchmark on the RTX 4090 (a held-out GPU) in NCHW and NHWC
(PyTorch 2.4) and eager and torch.compile ("-dynamo", PyTorch 2.9.1). For each model of the time
cases, the measured throughput ratio (NHWC / NCHW, compiled / eager) is set against gpuwise's
predicted ratio for the same trace with ``channels_last`` or ``compile`` set on the workload. A
validation only: nothing here is fitted. Baselines on the same rows: the plain roofline's ratio (per
operator, no layout or fusion effect: 1.00x unless the traces differ) and "no change" (1.00x).
"""

from __future__ import annotations

import dataclasses
import statistics

from benchmarks.baselines import roofline_step_s
from benchmarks.harness import (CELL_HEADER, ROOFLINE, Case, comparison_row, record_scoring, scored_words, verdict,
                                write_results)
from benchmarks.time_cases import HELD_OUT_FAMILIES, TIMM_MODELS, gpu_specs, timm_infer_rows
from benchmarks.time_traces import TraceKey, load_trace
from gpuwise.runtime import predict_step_time

SET = "time stack: held-out and fresh pairs"
NO_CHANGE = "no change (1.00x)"
PAIRS = [   # (change, GPU, baseline file, changed file)
    ("channels_last", "rtx-4090", "benchmark-infer-amp-nchw-pt240-cu124-rtx4090.csv",
     "benchmark-infer-amp-nhwc-pt240-cu124-rtx4090.csv"),
    ("compile", "rtx-4090", "benchmark-infer-amp-nchw-pt291-cu128-4090.csv",
     "benchmark-infer-amp-nchw-pt291-cu128-4090-dynamo.csv"),
    # the fresh check (README): a GPU no fit or score had seen, its -dynamo file read once
    ("compile", "rtx-pro-6000-maxq", "benchmark-infer-amp-nchw-pt291-cu130-pro6000maxq.csv",
     "benchmark-infer-amp-nchw-pt291-cu130-pro6000maxq-dynamo.csv"),
]


def picked(base: dict, changed: dict) -> list[tuple[str, int]]:
    """(model, size) of a pair's files, each model at its smallest size >= 224 px that both files hold."""
    return [(model, size) for model, size in sorted(base) if (model, size) in changed and size >= 224
            and not any(m == model and 224 <= s < size for m, s in base)]


def compiled_step_rows() -> list[dict]:
    """The compile pairs' held-out-family rows as step times (README.md, "Twentieth session"): one step of the
    ``-dynamo`` file measured (its batch / its throughput) against what ``estimate --mode infer --compile``
    predicts, the trace at that batch, beside roofline, roofline / 0.75 and gpuwise's eager step of it."""
    gpus = gpu_specs()
    out = []
    for change, gpu_id, base_name, changed_name in PAIRS:
        if change != "compile":
            continue
        gpu = gpus[gpu_id]
        base, changed = timm_infer_rows(base_name), timm_infer_rows(changed_name)
        for model, size in picked(base, changed):
            if TIMM_MODELS[model] not in HELD_OUT_FAMILIES:
                continue
            sps, batch = changed[(model, size)]
            tr = load_trace(TraceKey(f"timm:{model}", "infer", batch, size, "amp-fp16", "none"))
            on = dataclasses.replace(tr, workload=tr.workload.with_(compile=True))
            step = predict_step_time(on, gpu)
            out.append({"case": f"compile@{gpu_id}:{model}:{size}:b{batch}", "gpu": gpu_id, "family": TIMM_MODELS[model],
                        "measured_step_s": batch / sps, "predicted_step_s": step.step_time_s, "regime": step.regime,
                        "eager_step_s": predict_step_time(tr, gpu).step_time_s,
                        "roofline_step_s": roofline_step_s(on, gpu)})
    return out


def main() -> None:
    gpus = gpu_specs()
    record_scoring(SET)
    lines = ["# The software stack against public measurements: channels-last and torch.compile", "",
             "Script: `benchmarks/time_stack.py`. GPUs: RTX 4090 (held out) and RTX PRO 6000 Max-Q "
             "(the fresh check: its files read once, nothing changed after). Data: timm's inference "
             "benchmarks (AMP fp16, eager vs `-dynamo`, NCHW vs NHWC). Ratio = throughput with the change / without; "
             f"each model at its smallest size >= 224 px, the trace at the baseline file's batch ({scored_words(SET)}).",
             "", f"Error = predicted / measured speed-up - 1; cells: {CELL_HEADER}.", ""]
    cases = []
    for change, gpu_id, base_name, changed_name in PAIRS:
        gpu = gpus[gpu_id]
        base, changed = timm_infer_rows(base_name), timm_infer_rows(changed_name)
        rows = []
        for model, size in picked(base, changed):
            sps, batch = base[(model, size)]
            tr = load_trace(TraceKey(f"timm:{model}", "infer", batch, size, "amp-fp16", "none"))
            on = dataclasses.replace(tr, workload=tr.workload.with_(**{change: True}))
            pred = predict_step_time(tr, gpu).step_time_s / predict_step_time(on, gpu).step_time_s
            meas = changed[(model, size)][0] / sps
            rows.append((model, size, meas, pred))
            cases.append(Case(f"{change}@{gpu_id}:{model}:{size}", SET, "held-out", pred, meas, "speed-up",
                              {ROOFLINE: roofline_step_s(tr, gpu) / roofline_step_s(on, gpu), NO_CHANGE: 1.0}))
        errs = [p / m - 1 for _, _, m, p in rows]
        mine = cases[-len(rows):]
        lines += [f"## {change} on {gpu_id} ({base_name} -> {changed_name})", "",
                  f"{len(rows)} models. Measured speed-up median {statistics.median(m for _, _, m, _ in rows):.2f}x, "
                  f"predicted median {statistics.median(p for _, _, _, p in rows):.2f}x; |predicted / measured ratio - 1| "
                  f"median {100 * statistics.median(abs(e) for e in errs):.1f}%, worst {100 * max(abs(e) for e in errs):.1f}%; "
                  f"direction right on {sum((p > 1) == (m > 1) or abs(m - 1) < 0.02 for _, _, m, p in rows)} of {len(rows)}.", "",
                  f"| models | n | gpuwise | {ROOFLINE} ratio | {NO_CHANGE} |", "|---|---|---|---|---|",
                  comparison_row("all", mine, (ROOFLINE, NO_CHANGE)), "", verdict(mine, NO_CHANGE), "",
                  "| model | px | measured x | predicted x |", "|---|---|---|---|",
                  *[f"| {m} | {s} | {me:.2f} | {p:.2f} |" for m, s, me, p in rows], ""]
    write_results("time_stack", lines, {"set": SET, "cases": cases})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
