"""One workload, one answer: an estimate must not depend on the order in which frees reached the trace.

Frees that arrive together (autocast's weight cache cleared on exit, in the order of a C++ hash map) came in a
different order from one process to the next; the warm-up step then no longer lined up with the measured one,
and a new user got 841 or 809 MiB for the same ResNet-50 AMP inference on an H100 (2 runs in 10).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory import estimate_memory
from gpuwise.memory.adjust import frees_in_allocation_order
from gpuwise.trace import trace_workload
from gpuwise.trace.records import MemoryEvent
from gpuwise.workload import Workload


def _ev(seq, kind, block):
    return MemoryEvent(seq, kind, block, 8, "activations", "forward")


def test_a_run_of_frees_is_put_in_allocation_order_in_its_own_slots():
    events = [_ev(0, "alloc", 1), _ev(1, "alloc", 2), _ev(2, "alloc", 3), _ev(3, "free", 3), _ev(4, "free", 1),
              _ev(5, "alloc", 4), _ev(6, "free", 4), _ev(7, "free", 2)]
    ordered = frees_in_allocation_order(events)
    assert [(e.seq, e.kind, e.block_id) for e in ordered] == [
        (0, "alloc", 1), (1, "alloc", 2), (2, "alloc", 3), (3, "free", 1), (4, "free", 3),
        (5, "alloc", 4), (6, "free", 2), (7, "free", 4)]


def _frees_reversed(events):
    """The same trace as another process may record it: the warm-up step's runs of consecutive frees in reverse
    (the hash map's order follows addresses, which differ between the two steps of one process too)."""
    out, run = [], []
    for ev in [*events, None]:
        if ev is not None and ev.kind == "free" and ev.op_index < 0:
            run.append(ev)
            continue
        out.extend(replace(e, seq=slot.seq) for slot, e in zip(run, reversed(run)))
        run = []
        if ev is not None:
            out.append(ev)
    return tuple(out)


@pytest.mark.slow
def test_the_amp_inference_estimate_does_not_depend_on_the_order_frees_were_recorded():
    gpu = resolve_gpu(load_catalog(user_file=False), "h100-sxm")
    trace = trace_workload(Workload("torchvision:resnet50", batch_size=128, precision="amp-fp16", mode="infer"))
    other = replace(trace, events=_frees_reversed(trace.events))
    assert other.events != trace.events
    a, b = estimate_memory(trace, gpu), estimate_memory(other, gpu)
    assert (a.peak_allocated_bytes, a.peak_reserved_bytes, a.workspace_bytes) == (
        b.peak_allocated_bytes, b.peak_reserved_bytes, b.workspace_bytes)
