"""Turns a CPU trace's allocation events into the ones a CUDA step would make (rules in cuda.py)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Sequence

from gpuwise.memory.cuda import BLAS_OPS, CUDNN_OPS, CudaStack, cuda_edits, op_packet
from gpuwise.trace.records import MemoryEvent, OpRecord, Trace

_WARMUP = -1   # step key of the warm-up step's events once aligned


@dataclass(frozen=True)
class CudaEvents:
    events: tuple[MemoryEvent, ...]
    uses_cublas: bool
    uses_cudnn: bool
    notes: tuple[str, ...] = ()


def cuda_events(trace: Trace, stack: CudaStack) -> CudaEvents:
    ops = trace.ops
    events = frees_in_allocation_order(trace.events)
    notes: list[str] = []
    op_of, aligned = _op_indices(events)
    if not aligned and any(e.op_index >= 0 for e in events):
        notes.append("warm-up step not aligned with the measured one: CUDA rules applied to the measured step only")

    edits = cuda_edits(ops, stack)
    resize: dict[int, int] = {}
    workspace: dict[int, int] = {}
    for e in edits:
        if e.output_bytes is not None:
            resize[e.op_index] = e.output_bytes
        if e.workspace_bytes:
            workspace[e.op_index] = workspace.get(e.op_index, 0) + e.workspace_bytes

    uses_cublas = any(op_packet(o.op) in BLAS_OPS for o in ops)
    uses_cudnn = any(op_packet(o.op) in CUDNN_OPS for o in ops)
    persistent = _cublas_handles(ops, stack) if uses_cublas else {}

    inserts: dict[int, list[MemoryEvent]] = {}        # position -> events inserted before it
    next_id = max((e.block_id for e in events), default=0) + 1
    step_positions = _positions(events, op_of)
    for op_index, nbytes in sorted(workspace.items()):
        for step, table in step_positions.items():
            pos = _after_op(table, op_index, len(events))
            anchor = events[min(pos, len(events) - 1)]
            phase = ops[op_index].phase if op_index < len(ops) else anchor.phase
            module = ops[op_index].module if op_index < len(ops) else ""
            inserts.setdefault(pos, []).extend((
                MemoryEvent(anchor.seq, "alloc", next_id, nbytes, "workspace", phase, module, op_index),
                MemoryEvent(anchor.seq, "free", next_id, nbytes, "workspace", phase, module, op_index),
            ))
            next_id += 1
    for op_index, nbytes in persistent.items():
        pos = _first_call(step_positions, op_index, len(events))
        anchor = events[min(pos, len(events) - 1)] if events else None
        if anchor is None:
            continue
        inserts.setdefault(pos, []).append(
            MemoryEvent(anchor.seq, "alloc", next_id, nbytes, "workspace", ops[op_index].phase,
                        "cuBLAS workspace", op_index))
        next_id += 1

    out: list[MemoryEvent] = []
    dropped: set[int] = set()
    for i, ev in enumerate(events):
        out.extend(inserts.get(i, ()))
        op_index = op_of[i]
        if op_index >= _WARMUP_OFFSET:
            op_index -= _WARMUP_OFFSET
        if ev.kind == "alloc" and op_index in resize:
            nbytes = resize[op_index]
            if nbytes == 0:
                dropped.add(ev.block_id)
                continue
            ev = replace(ev, size_bytes=nbytes)
        elif ev.kind == "free" and ev.block_id in dropped:
            continue
        out.append(ev)
    out.extend(inserts.get(len(events), ()))
    if resize:
        notes.append(f"{sum(1 for e in edits if e.output_bytes is not None)} CPU-path outputs changed to what CUDA kernels keep")
    return CudaEvents(tuple(out), uses_cublas, uses_cudnn, tuple(notes))


def frees_in_allocation_order(events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    """``events`` with each run of consecutive frees in the order their blocks were allocated (block ids count
    allocations), each keeping the ``seq`` of its slot. Frees that come together (autocast's weight cache
    cleared on exit, in a C++ hash map's order; a module's temporaries) reach a trace in an order that differs
    from one process to the next (addresses, PYTHONHASHSEED): the allocator ends in the same state either way,
    but the warm-up step stopped lining up with the measured one and one estimate had two answers (a new
    user's ResNet-50 AMP inference on an H100: 841 or 809 MiB allocated)."""
    out: list[MemoryEvent] = []
    run: list[MemoryEvent] = []

    def flush() -> None:
        for slot, ev in zip(run, sorted(run, key=lambda e: e.block_id)):
            out.append(ev if ev.seq == slot.seq else replace(ev, seq=slot.seq))
        run.clear()

    for ev in events:
        if ev.kind == "free":
            run.append(ev)
            continue
        flush()
        out.append(ev)
    flush()
    return out


def _cublas_handles(ops: Sequence[OpRecord], stack: CudaStack) -> dict[int, int]:
    """op index of the first BLAS call on each thread -> workspace bytes allocated there."""
    firsts: dict[str, int] = {}
    for o in ops:
        thread = "backward" if o.phase == "backward" else "main"
        if thread not in firsts and op_packet(o.op) in BLAS_OPS:
            firsts[thread] = o.index
    return {i: stack.cublas_workspace_bytes for i in firsts.values()}


def _op_indices(events: Sequence[MemoryEvent]) -> tuple[list[int], bool]:
    """Each event's op index; the warm-up step's events (-1) get the index of the same event of
    the measured step when the two steps allocate the same sequence of sizes, phase by phase."""
    op_of = [e.op_index for e in events]
    start = next((i for i, e in enumerate(events) if e.op_index >= 0), None)
    if start is None:
        return op_of, False
    aligned = False
    for phase in ("forward", "backward", "optimizer"):
        warm = [i for i in range(start) if events[i].phase == phase]
        meas = [i for i in range(start, len(events)) if events[i].phase == phase and events[i].op_index >= 0]
        if not warm or not meas:
            continue
        sig = lambda idx: [(events[i].kind, events[i].size_bytes) for i in idx]  # noqa: E731
        if len(warm) >= len(meas) and sig(warm[-len(meas):]) == sig(meas):
            for w, m in zip(warm[-len(meas):], meas):
                op_of[w] = _WARMUP_OFFSET + events[m].op_index
            aligned = True
    return op_of, aligned


# Warm-up events carry op_index + _WARMUP_OFFSET internally so the two steps stay apart.
_WARMUP_OFFSET = 1 << 40


def _positions(events: Sequence[MemoryEvent], op_of: list[int]) -> dict[int, "_Table"]:
    """Per step (0 measured, -1 warm-up): the ops' first and last allocation positions."""
    spans: dict[int, dict[int, list[int]]] = {}
    for i, op_index in enumerate(op_of):
        if op_index < 0 or events[i].kind != "alloc":   # an op's frees may follow it: workspace goes before
            continue
        step = _WARMUP if op_index >= _WARMUP_OFFSET else 0
        key = op_index - _WARMUP_OFFSET if step == _WARMUP else op_index
        span = spans.setdefault(step, {}).setdefault(key, [i, i])
        span[1] = i
    return {step: _Table(sorted((k, s[0], s[1]) for k, s in d.items())) for step, d in spans.items()}


class _Table:
    def __init__(self, rows: list[tuple[int, int, int]]) -> None:
        self.rows = rows
        self.keys = [r[0] for r in rows]

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __contains__(self, op_index: int) -> bool:
        j = bisect.bisect_left(self.keys, op_index)
        return j < len(self.keys) and self.keys[j] == op_index


def _after_op(table: _Table, op_index: int, n: int) -> int:
    """Position just after the op's last event (or before the next op's first one)."""
    j = bisect.bisect_left(table.keys, op_index)
    if j < len(table.rows) and table.rows[j][0] == op_index:
        return table.rows[j][2] + 1
    return table.rows[j][1] if j < len(table.rows) else n


def _first_call(step_positions: dict[int, _Table], op_index: int, n: int) -> int:
    """Position just before the op's first run: in the warm-up step where that step lines up with the measured one
    there; where a warm-up ran but does not line up there (with gradient accumulation or kept gradients only its
    forward does: its backward keeps its gradients), at the measured step's start, as the warm-up's backward made
    the handle before it (made at the measured backward's first GEMM instead, it missed a peak in the measured
    forward, kept gradients' peak: the peak with --keep-grads read 0.8 MiB under the peak without); with no
    warm-up, before the op in the measured step. Never after the last event, where its workspace never counted."""
    warmup, measured = step_positions.get(_WARMUP), step_positions.get(0) or _Table([])
    if warmup and op_index in warmup:
        return _before_op(warmup, op_index, n)
    if warmup and measured:
        return min(row[1] for row in measured.rows)
    return _before_op(measured, op_index, n)


def _before_op(table: _Table, op_index: int, n: int) -> int:
    j = bisect.bisect_left(table.keys, op_index)
    return table.rows[j][1] if j < len(table.rows) else n
