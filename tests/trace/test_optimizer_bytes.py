"""What an in-place optimizer kernel moves: every tensor its schema writes, read and written once.

A fused optimizer returns nothing, so its writes are the arguments it mutates. The recorder counted one
parameter tensor as its writes (a new-user trial found fused AdamW predicted faster than the bandwidth
allows: 0.75 ms for ViT-B/16 on an A100, where 28 bytes a parameter need 1.19 ms).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.kernels import op_times
from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

TRANSFORMER = f"{Path(__file__).parents[1] / 'memory' / 'tiny_models.py'}:transformer"
F32 = 4


def _optimizer_ops(**fields):
    trace = trace_workload(Workload(model=TRANSFORMER, batch_size=2, seq_len=32, **fields))
    return trace, [o for o in trace.ops if o.phase == "optimizer" and o.kernel_count]


@pytest.mark.parametrize("optimizer, read, written", [
    ("adamw", 4 * F32, 3 * F32),      # reads param, grad, exp_avg, exp_avg_sq; writes param, exp_avg, exp_avg_sq
    ("sgd", 2 * F32, 1 * F32),        # reads param, grad; writes param
])
def test_a_fused_optimizer_reads_and_writes_each_state_once(optimizer, read, written):
    trace, ops = _optimizer_ops(optimizer=optimizer, optimizer_impl="fused")
    fused = [o for o in ops if o.op.startswith("aten._fused_")]
    assert len(fused) == 1
    params = trace.trainable_param_count
    assert fused[0].bytes_read == pytest.approx(read * params, rel=0.01)
    assert fused[0].bytes_written == pytest.approx(written * params, rel=0.01)


def test_no_optimizer_implementation_is_timed_faster_than_its_bytes_allow():
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    cal = load_calibration()
    for impl in ("fused", "foreach", "for-loop"):
        _, ops = _optimizer_ops(optimizer="adamw", optimizer_impl=impl)
        moved = sum(o.bytes_read + o.bytes_written for o in ops)
        device_s = sum(t.device_s for t in op_times(ops, gpu, "fp32", cal))
        assert device_s >= moved / (gpu.memory_bandwidth_gbs * 1e9), impl


def test_the_grad_scaler_unscales_every_gradient_in_place():
    trace, ops = _optimizer_ops(optimizer="adamw", optimizer_impl="foreach", precision="amp-fp16")
    unscale = [o for o in ops if "non_finite_check_and_unscale" in o.op]
    assert len(unscale) == 1
    assert unscale[0].bytes_written >= F32 * trace.trainable_param_count
