"""While a trace runs, the objects that existed before it are frozen (gc.freeze), so that the collector's full passes
walk only the trace's own objects; afterwards they are unfrozen, a caller's own freeze is left alone, and the trace
records the same operators and memory events as without the freeze."""

from __future__ import annotations

import contextlib
import dataclasses
import gc

import pytest

from gpuwise.trace import tracer
from gpuwise.trace.collector import older_objects_frozen
from gpuwise.workload import Workload

RESNET18 = Workload(model="torchvision:resnet18", batch_size=2, image_size=64, optimizer="adamw")


def test_the_steps_run_with_the_older_objects_frozen_and_nothing_stays_frozen(monkeypatch):
    before = gc.get_freeze_count()
    frozen_while_running: list[int] = []
    run = tracer._run

    def spy(*args, **kwargs):
        frozen_while_running.append(gc.get_freeze_count())
        return run(*args, **kwargs)

    monkeypatch.setattr(tracer, "_run", spy)
    tracer.trace_workload(RESNET18)
    assert before == 0 and frozen_while_running[0] > 0
    assert gc.get_freeze_count() == 0


def test_an_error_unfreezes_and_a_callers_own_freeze_is_left_in_place():
    with pytest.raises(ValueError):
        with older_objects_frozen():
            raise ValueError("the model refused its inputs")
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        theirs = gc.get_freeze_count()
        with older_objects_frozen():
            assert gc.get_freeze_count() == theirs
        assert gc.get_freeze_count() == theirs
    finally:
        gc.unfreeze()


def test_the_freeze_changes_nothing_the_trace_records(monkeypatch):
    frozen = tracer.trace_workload(RESNET18)
    monkeypatch.setattr(tracer, "older_objects_frozen", contextlib.nullcontext)
    unfrozen = tracer.trace_workload(RESNET18)
    assert frozen.ops and frozen.events
    assert dataclasses.replace(frozen, trace_time_s=0.0) == dataclasses.replace(unfrozen, trace_time_s=0.0)
