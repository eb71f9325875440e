"""``predict_step_time`` times each distinct op once: the same results as timing every op."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.runtime import predict as predict_module
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.kernels import op_key, op_time, op_times
from gpuwise.runtime.stack import Stack
from gpuwise.workload import Workload
from runtime_fakes import conv

CAL = load_calibration()
GPU_IDS = ("t4", "v100-16gb-sxm2", "a100-80gb-sxm4", "l4", "rtx-4090", "h100-sxm", "b200")
VARIANTS = ({}, {"precision": "amp-fp16"}, {"precision": "tf32"}, {"channels_last": True}, {"compile": True})


@pytest.fixture(scope="module")
def resnet():
    from gpuwise.trace import trace_workload

    return trace_workload(Workload(model="torchvision:resnet18", batch_size=2, image_size=64, optimizer="adamw"))


@pytest.fixture(scope="module")
def gpus():
    from gpuwise.catalog import load_catalog

    by_id = {g.id: g for g in load_catalog(user_file=False).gpus}
    return [by_id[i] for i in GPU_IDS]      # every id must exist: a renamed GPU fails here, not silently


def _every_op(ops, gpu, precision, cal, stack):
    return [op_time(op, gpu, precision, cal, stack) for op in ops]


def test_a_traced_model_repeats_ops_and_each_distinct_one_is_timed_once(resnet):
    keys = {op_key(op) for op in resnet.ops}
    assert len(keys) < len(resnet.ops) / 2
    assert len({op.module for op in resnet.ops}) > 1    # repeats across modules share a time


@pytest.mark.parametrize("changes", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "base")
def test_predictions_equal_timing_every_op(resnet, gpus, changes, monkeypatch):
    trace = dataclasses.replace(resnet, workload=resnet.workload.with_(**changes))
    stack = Stack.from_workload(trace.workload)
    fast = {}
    for gpu in gpus:
        assert (op_times(trace.ops, gpu, trace.workload.precision, CAL, stack)
                == _every_op(trace.ops, gpu, trace.workload.precision, CAL, stack))
        fast[gpu.id] = [predict_module.predict_step_time(trace, gpu, count=c) for c in (1, 4)]
    monkeypatch.setattr(predict_module, "op_times", _every_op)
    for gpu in gpus:
        assert fast[gpu.id] == [predict_module.predict_step_time(trace, gpu, count=c) for c in (1, 4)], gpu.id


def test_ops_differing_in_what_op_time_reads_never_share_a_time(gpus):
    gpu = gpus[0]
    base = conv(8, 64, 28, 28, 64)
    others = [dataclasses.replace(base, attrs={**base.attrs, "groups": 64}, input_shapes=(base.input_shapes[0], (64, 1, 3, 3))),
              dataclasses.replace(base, attrs={**base.attrs, "channels_last": True}),
              dataclasses.replace(base, phase="backward"), dataclasses.replace(base, kernel_count=3)]
    moved = dataclasses.replace(base, index=7, module="layer2.conv1")
    ops = [base, *others, moved]
    assert len({op_key(op) for op in ops}) == len(others) + 1
    for precision in ("fp32", "amp-fp16"):
        assert op_times(ops, gpu, precision, CAL) == _every_op(ops, gpu, precision, CAL, Stack())


def test_an_unhashable_attribute_is_timed_on_its_own(gpus):
    op = conv(8, 64, 28, 28, 64)
    listed = dataclasses.replace(op, attrs={**op.attrs, "stride": [1, 1]})
    ops = [listed, listed, op]
    assert op_times(ops, gpus[0], "fp32", CAL) == _every_op(ops, gpus[0], "fp32", CAL, Stack())
