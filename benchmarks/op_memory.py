"""Per-op memory rules against Liger-Kernel's measured peaks of plain PyTorch operators (issue 26 item 1).

``kernels-modern/liger_kernel_bench.csv.gz`` holds, beside Liger's Triton kernels, the eager PyTorch /
Hugging Face reference of each operator, with ``torch.cuda.max_memory_allocated`` (MiB, reset before each
call, p50 of 10 calls) of a forward + backward on real NVIDIA GPUs. Each scored row is rebuilt as Liger
0.5.10's benchmark script builds it (``benchmark/scripts/benchmark_<op>.py`` in the PyPI sdist): the same
tensors, the twin Liger module whose weights the script also allocates, ``retain_graph`` where it passes it.
The call runs three times on fake tensors under gpuwise's recorder (``trace.Recorder``); the CUDA rules
(``memory.adjust.cuda_events``: cuBLAS workspace, CUDA kernels' outputs) edit the last call, and its peak of
allocated bytes (512-byte rounded, as the caching allocator counts) is the prediction.

Nothing is fitted on these rows (protocol: benchmarks/README.md, "Sixth session"). Baseline on the same
rows, a closed form from the shapes: what the script holds before the call (inputs, weights, the upstream
gradient), one output and the gradient of each tensor that requires one.
Writes benchmarks/results/op_memory.md (+ .json) (run: python -m benchmarks.op_memory).
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
import statistics
from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from benchmarks.harness import CELL_HEADER, DATA, Case, comparison_row, record_scoring, scored_words, write_results
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory.adjust import cuda_events
from gpuwise.memory.allocator import round_size
from gpuwise.memory.cuda import CudaStack
from gpuwise.trace import fake
from gpuwise.trace.recorder import Recorder

SOURCE = DATA / "kernels-modern" / "liger_kernel_bench.csv.gz"
HELD_OUT_SET = "Per-op memory: Liger plain-PyTorch rows"
SHAPES = "closed form (shapes)"
MIB = 2 ** 20
CALLS = 3
DTYPES = {"torch.float32": torch.float32, "torch.bfloat16": torch.bfloat16, "torch.float16": torch.float16}


class LlamaRMSNorm(nn.Module):
    """Liger's benchmark_rms_norm.py reference, verbatim (its weight stays fp32: the output is fp32)."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


@dataclass(frozen=True)
class Setup:
    """What a script builds: modules (the measured one first), the tensors it holds, and the call."""

    modules: tuple[nn.Module, ...]
    make_tensors: Callable[[], dict]          # run under the fake mode
    call: Callable[[nn.Module, dict, Callable[[], None]], None]   # one call (Liger's ``full``); the third
    # argument is called between its forward and its backward (the phase the tracer gives the backward:
    # the autograd engine's own thread, with its own cuBLAS handle and workspace)
    shapes_bytes: Callable[[dict, nn.Module], int]   # the closed-form baseline


def _nbytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _param_bytes(*modules) -> int:
    return sum(_nbytes(p) for m in modules for p in m.parameters())


def _norm(op: str, n: int, cfg: dict) -> Setup:
    m, dtype, eps = cfg["M"], DTYPES[cfg["dtype"]], cfg["eps"]
    with torch.device("meta"):
        if op == "layer_norm":
            measured, twin = nn.LayerNorm(n, eps=eps), nn.LayerNorm(n)     # LigerLayerNorm: weight + bias
        else:
            measured, twin = LlamaRMSNorm(n, eps=eps), LlamaRMSNorm(n)     # LigerRMSNorm: an fp32 weight

    def tensors():
        x = torch.randn((m, n), dtype=dtype)
        dy = torch.randn_like(x)
        x.requires_grad_(True)
        return {"x": x, "dy": dy}

    def call(mod, t, backward):
        y = mod(t["x"])
        backward()
        y.backward(t["dy"], retain_graph=True)

    def shapes(t, mod):
        out = m * n * (4 if op == "rms_norm" else dtype.itemsize)          # the script's output dtype
        return _nbytes(t["x"], t["dy"]) + _param_bytes(mod, twin) + out + _nbytes(t["x"]) + _param_bytes(mod)

    return Setup((measured, twin), tensors, call, shapes)


def _mlp(op: str, seq: int, cfg: dict) -> Setup:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    bsz = cfg["B"] if op == "swiglu" else cfg["bsz"]
    dtype = DTYPES[cfg["dtype"]]
    config = LlamaConfig(hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
                         hidden_act=cfg["hidden_act"])
    with torch.device("meta"):
        layer = LlamaMLP(config).to(dtype)

    def tensors():
        return {"x": torch.randn(bsz, seq, cfg["hidden_size"], dtype=dtype, requires_grad=True)}

    def call(mod, t, backward):
        y = mod(t["x"])
        dy = torch.randn_like(y)
        backward()
        y.backward(dy, retain_graph=True)

    def shapes(t, mod):
        x = _nbytes(t["x"])
        return x + _param_bytes(mod) + 2 * x + x + _param_bytes(mod)        # x, weights, y and dy, grads

    return Setup((layer,), tensors, call, shapes)


def _cross_entropy(v: int, cfg: dict) -> Setup:
    rows = cfg["B"] * cfg["T"]

    def tensors():
        return {"input": torch.randn(rows, v, requires_grad=True),
                "target": torch.randint(v, (rows, 1)).squeeze(1)}

    def call(mod, t, backward):
        loss = mod(t["input"], t["target"])
        backward()
        loss.backward()

    def shapes(t, mod):
        return _nbytes(t["input"], t["target"]) + _nbytes(t["input"])

    return Setup((nn.CrossEntropyLoss(),), tensors, call, shapes)


def _embedding(v: int, cfg: dict) -> Setup:
    dtype = DTYPES[cfg["dtype"]]
    with torch.device("meta"):
        measured, twin = nn.Embedding(v, cfg["D"]).to(dtype), nn.Embedding(v, cfg["D"]).to(dtype)   # LigerEmbedding

    def tensors():
        return {"ids": torch.randint(0, v, (cfg["B"], cfg["T"]))}

    def call(mod, t, backward):
        out = mod(t["ids"])
        dy = torch.randn_like(out)
        backward()
        out.backward(dy)

    def shapes(t, mod):
        out = cfg["B"] * cfg["T"] * cfg["D"] * dtype.itemsize
        return _nbytes(t["ids"]) + _param_bytes(mod, twin) + 2 * out + _param_bytes(mod)

    return Setup((measured, twin), tensors, call, shapes)


def setup_for(op: str, x: int, cfg: dict) -> Setup | None:
    """The script's setup for a row whose config Liger 0.5.10's script fixes completely; None otherwise."""
    if op in ("layer_norm", "rms_norm") and set(cfg) == {"M", "dtype", "eps"}:
        return _norm(op, x, cfg)
    if op == "swiglu" and "B" in cfg and "seq_len" not in cfg:
        return _mlp(op, x, cfg)
    if op == "geglu" and "bsz" in cfg and "seq_len" not in cfg:
        return _mlp(op, x, cfg)
    if op == "cross_entropy" and set(cfg) == {"B", "T"}:
        return _cross_entropy(x, cfg)
    if op == "embedding" and set(cfg) == {"B", "T", "D", "dtype"}:
        return _embedding(x, cfg)
    return None


@dataclass(frozen=True)
class Predicted:
    peak_allocated_bytes: int
    shapes_bytes: int


@dataclass(frozen=True)
class Calls:
    """What the script's calls left under the recorder: the last call's ops, every memory event, where the
    last call's events start, and the closed-form baseline's bytes."""

    ops: tuple
    events: list
    start_seq: int
    shapes_bytes: int


def run_calls(setup: Setup, clear_grad: str | None = None) -> Calls:
    """The script's ``CALLS`` calls on fake tensors under gpuwise's recorder; the last one is recorded.
    ``clear_grad``: the tensor whose gradient the script sets to None before each call (``do_bench``'s
    ``grad_to_none``)."""
    recorder = Recorder(training=True)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    for m in setup.modules:
        fake.fake_module(m, fake_mode)
    with fake_mode, recorder:
        for m in setup.modules:
            fake.register_state(m, recorder)
        recorder.category = "inputs"
        tensors = setup.make_tensors()
        recorder.category = None
        start_seq = 0
        for i in range(CALLS):
            measured = i == CALLS - 1
            if measured:
                start_seq = len(recorder.memory_events())
            if clear_grad is not None:
                tensors[clear_grad].grad = None
            recorder.measured = recorder.recording_ops = measured
            recorder.phase = "forward"
            setup.call(setup.modules[0], tensors, lambda: setattr(recorder, "phase", "backward"))
            recorder.phase = "other"
        recorder.recording_ops = False
        shapes = setup.shapes_bytes(tensors, setup.modules[0])
        recorder.closed = True
    return Calls(tuple(recorder.ops), recorder.memory_events(), start_seq, shapes)


def predict(setup: Setup, stack: CudaStack) -> Predicted:
    """The script's calls on fake tensors; the last call's peak of allocated bytes with the CUDA rules."""
    calls = run_calls(setup)
    # what cuda_events reads of a Trace
    adjusted = cuda_events(SimpleNamespace(ops=calls.ops, events=calls.events), stack).events
    live: dict[int, int] = {}
    allocated = peak = 0
    for ev in adjusted:
        if ev.kind == "alloc":
            if ev.size_bytes > 0:
                live[ev.block_id] = round_size(ev.size_bytes)
                allocated += live[ev.block_id]
        else:
            allocated -= live.pop(ev.block_id, 0)
        if ev.seq >= calls.start_seq:
            peak = max(peak, allocated)
    return Predicted(peak, calls.shapes_bytes)


def load_rows() -> list[dict]:
    with gzip.open(SOURCE, "rt", newline="") as f:
        return [r for r in csv.DictReader(f)
                if r["is_plain_pytorch"] == "True" and r["metric"] == "memory" and r["mode"] == "full"
                and r["provider"] == "huggingface" and r["gpu"].startswith("NVIDIA")]


def main() -> None:
    logging.getLogger("transformers").setLevel(logging.ERROR)
    catalog = load_catalog(user_file=False)
    cases: list[Case] = []
    detail: list[dict] = []
    left_out: dict[str, int] = defaultdict(int)
    memo: dict[tuple, Predicted] = {}
    for i, row in enumerate(load_rows()):
        op, cfg = row["operator"], json.loads(row["extra_config"])
        try:
            x = int(float(row["x_value"]))
        except ValueError:      # a sweep over named model configs, not sizes
            left_out[f"{op}: a sweep over named configs ({row['x_name']})"] += 1
            continue
        setup_key = (op, x, row["extra_config"])
        try:
            gpu = resolve_gpu(catalog, row["gpu"])
        except Exception:       # a GPU the catalog does not hold: its CUDA stack is unknown
            left_out[f"GPU not in the catalog ({row['gpu']})"] += 1
            continue
        stack = CudaStack.for_gpu(gpu)
        key = (*setup_key, stack)
        if key not in memo:
            setup = setup_for(op, x, cfg)
            if setup is None:
                left_out[f"{op}: a config Liger 0.5.10's script does not fix ({row['x_name']} sweep)"] += 1
                continue
            memo[key] = predict(setup, stack)
        p = memo[key]
        measured = float(row["value_p50"]) * MIB
        case = Case(f"{i}:{op}/{row['x_name']}={x}/{gpu.id}/liger-{row['liger_version']}", HELD_OUT_SET, "held-out",
                    p.peak_allocated_bytes / MIB, measured / MIB, "MiB", {SHAPES: p.shapes_bytes / MIB})
        cases.append(case)
        detail.append({"case": case.id, "operator": op, "gpu": gpu.id, "x_name": row["x_name"], "x": x,
                       "config": cfg, "liger_version": row["liger_version"],
                       "predicted_mib": case.predicted, "measured_mib": case.measured, "error": case.error})
    if not cases:
        raise SystemExit("op_memory: no rows scored (is ../shared/data/public-benchmarks/kernels-modern/ there?)")
    count = record_scoring(HELD_OUT_SET)
    by_op = defaultdict(list)
    for c, d in zip(cases, detail):
        by_op[d["operator"]].append(c)
    worst_under = min(cases, key=lambda c: c.error)
    lines = ["# Per-op memory rules against Liger's measured peaks (plain PyTorch, NVIDIA GPUs)", "",
             f"{len(cases)} rows of `kernels-modern/liger_kernel_bench.csv.gz` (the eager PyTorch / Hugging Face "
             "reference rows, forward + backward, `torch.cuda.max_memory_allocated` p50 of 10 calls), every one held "
             f"out: nothing is fitted on them ({scored_words(HELD_OUT_SET)}; this run is number {count}). Each row is "
             "rebuilt as Liger 0.5.10's benchmark script builds it and traced on fake tensors; error = predicted / "
             "measured - 1 of the peak allocated bytes (negative: predicted low, an OOM risk).", "",
             f"| operator | n | gpuwise | {SHAPES} |", "|---|---|---|---|", f"| (cells: {CELL_HEADER}) | | | |",
             comparison_row("all", cases, (SHAPES,))]
    for op in sorted(by_op):
        lines.append(comparison_row(op, by_op[op], (SHAPES,)))
    mine = statistics.median(abs(c.error) for c in cases)
    theirs = statistics.median(abs(c.baseline_error(SHAPES)) for c in cases)
    runs = defaultdict(list)
    for d in detail:
        runs[(d["operator"], d["gpu"], d["liger_version"], json.dumps(d["config"], sort_keys=True))].append(d)
    lines += ["", "Per run (one operator, GPU, Liger version and config; rows of one run differ only in the swept size): "
                  "a gap between measured and predicted that stays the same MiB across the sweep is memory the "
                  "operator's shapes do not explain (held elsewhere in that benchmark process).", "",
              "| operator | GPU | Liger | n | signed median | measured - predicted, MiB (min .. max) |",
              "|---|---|---|---|---|---|"]
    for (op, gpu, version, _), ds in sorted(runs.items()):
        gaps = [d["measured_mib"] - d["predicted_mib"] for d in ds]
        lines.append(f"| {op} | {gpu} | {version} | {len(ds)} | {statistics.median(d['error'] for d in ds):+.1%} | "
                     f"{min(gaps):,.0f} .. {max(gaps):,.0f} |")
    lines += ["", f"Median |error| {mine:.1%} vs the closed form's {theirs:.1%}: gpuwise "
                  f"{'beats' if mine < theirs else '**does not beat**'} the closed form on these rows. "
                  f"Worst under: {worst_under.error:+.1%} ({worst_under.id}: {worst_under.predicted:,.0f} MiB "
                  f"predicted, {worst_under.measured:,.0f} measured).", "",
              "What each operator checks: layer_norm and rms_norm, the saved statistics and the fp32 upcast "
              "autograd keeps (RMSNorm's fp32 weight makes an fp32 output); swiglu and geglu, the activations "
              "LlamaMLP saves for backward and the cuBLAS workspace; cross_entropy, log_softmax's saved output "
              "over the logits; embedding, the dense weight gradient (and its accumulation in later calls).", "",
              "Left out: " + ("; ".join(f"{n} rows: {why}" for why, n in sorted(left_out.items())) or "none") + "."]
    write_results("op_memory", lines, {"held_out_set": HELD_OUT_SET, "scored": count, "cases": cases,
                                       "detail": detail, "left_out": dict(left_out)})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
