"""The software stack as inputs: channels-last, attention implementation, torch.compile, host cost,
input pipeline. Each moves time in the direction it does on a GPU (fast: hand-made traces)."""

from __future__ import annotations

import dataclasses

from gpuwise.runtime import predict_step_time
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.host import host_s
from gpuwise.runtime.kernels import op_time
from gpuwise.runtime.stack import Stack
from gpuwise.trace.records import OpRecord, Trace
from gpuwise.workload import Workload
from runtime_fakes import a100_like, conv, mlp_trace, pointwise, t4_like

CAL = load_calibration()


def sdpa(b, h, s, d, *, phase="forward", dtype="float16") -> OpRecord:
    q = (b, h, s, d)
    name = "aten._scaled_dot_product_flash_attention_for_cpu" + ("_backward" if phase == "backward" else "")
    shapes = ((q, q, q, q) if phase == "backward" else (q, q, q))
    return OpRecord(index=0, op=f"{name}.default", phase=phase, module="attn", input_shapes=shapes,
                    input_dtypes=(dtype,) * len(shapes), output_shapes=(q,), output_dtypes=(dtype,),
                    flops=0, bytes_read=3 * b * h * s * d * 2, bytes_written=b * h * s * d * 2)


def _with(trace: Trace, **changes) -> Trace:
    return dataclasses.replace(trace, workload=trace.workload.with_(**changes))


def cnn_trace(batch=64, precision="amp-fp16", **stack) -> Trace:
    dtype = "float16" if precision == "amp-fp16" else "float32"
    ops = []
    for _ in range(4):
        ops += [conv(batch, 64, 56, 56, 64, dtype=dtype),
                dataclasses.replace(pointwise(batch * 64 * 56 * 56, op="aten.native_batch_norm.default", dtype=dtype)),
                pointwise(batch * 64 * 56 * 56, dtype=dtype), pointwise(batch * 64 * 56 * 56, op="aten.add_.Tensor", dtype=dtype)]
    ops = [dataclasses.replace(op, index=i) for i, op in enumerate(ops)]
    wl = Workload(model="test:cnn", batch_size=batch, precision=precision, mode="infer", optimizer="none", **stack)
    return Trace(workload=wl, ops=tuple(ops), events=(), param_count=4 * 64 * 64 * 9, trainable_param_count=0,
                 samples_per_step=batch)


def test_channels_last_makes_an_amp_cnn_step_faster():
    # Issue 16: --channels-last changed nothing (ResNet-50 AMP on an A100: 89.8 ms either way).
    gpu = a100_like()
    nchw = predict_step_time(cnn_trace(), gpu)
    nhwc = predict_step_time(cnn_trace(channels_last=True), gpu)
    assert nhwc.step_time_s < nchw.step_time_s
    assert nhwc.kernel_launches < nchw.kernel_launches
    assert "channels-last" in nhwc.stack and "NCHW" in nchw.stack


def test_eager_attention_materialises_scores_more_time_and_kernels_than_sdpa():
    gpu = a100_like()
    stacks = {impl: Stack(attention=impl) for impl in ("sdpa", "flash2", "eager")}
    for phase in ("forward", "backward"):
        op = sdpa(8, 12, 1024, 64, phase=phase)
        times = {impl: op_time(op, gpu, "amp-fp16", CAL, s) for impl, s in stacks.items()}
        assert times["eager"].device_s > times["sdpa"].device_s
        assert times["eager"].kernels > times["sdpa"].kernels
        assert times["flash2"].device_s == times["sdpa"].device_s
    # ... and the scores are batch x heads x seq^2: 4x the sequence, ~16x the extra time.
    extra = lambda s: (op_time(sdpa(8, 12, s, 64), gpu, "amp-fp16", CAL, stacks["eager"]).device_s  # noqa: E731
                       - op_time(sdpa(8, 12, s, 64), gpu, "amp-fp16", CAL, stacks["sdpa"]).device_s)
    assert extra(2048) > 8 * extra(512)


def test_compile_fuses_elementwise_chains_into_fewer_kernels_and_is_never_slower():
    for gpu in (a100_like(), t4_like()):
        for batch in (1, 64):
            eager = predict_step_time(cnn_trace(batch), gpu)
            compiled = predict_step_time(cnn_trace(batch, compile=True), gpu)
            assert compiled.kernel_launches < eager.kernel_launches
            assert compiled.step_time_s <= eager.step_time_s
            assert "torch.compile" in compiled.stack and "eager" in eager.stack


def test_eager_forward_conv_costs_the_host_more_than_an_activation_and_backward_less():
    # Issue 16: host_op_s = 9 us for every op was a prior; an eager conv goes through nn.Module,
    # the dispatcher and cuDNN's plan cache, a ReLU through far less; autograd issues backward in C++.
    eager = Stack()
    assert host_s("conv", 1, "forward", eager) > host_s("elementwise", 1, "forward", eager)
    assert host_s("conv", 1, "backward", eager) < host_s("conv", 1, "forward", eager)
    assert host_s("elementwise", 3, "forward", eager) > host_s("elementwise", 1, "forward", eager)
    assert host_s("elementwise", 1, "forward", Stack(compile=True)) < host_s("elementwise", 1, "forward", eager)


def test_small_batches_are_host_bound_and_the_step_grows_monotonically_with_the_batch():
    gpu = a100_like()
    times = [predict_step_time(cnn_trace(b), gpu).step_time_s for b in (1, 2, 4, 8, 16, 64, 256)]
    assert times == sorted(times)
    one = predict_step_time(cnn_trace(1), gpu)
    host_total = sum(host_s(op_time(op, gpu, "amp-fp16", CAL).cls, op_time(op, gpu, "amp-fp16", CAL).kernels,
                            op.phase, Stack()) for op in cnn_trace(1).ops)
    assert one.step_time_s >= host_total and one.bound == "launch"


def test_input_rate_caps_throughput_and_warns_when_data_bound():
    gpu = a100_like()
    free = predict_step_time(cnn_trace(64), gpu)
    slow_loader = predict_step_time(cnn_trace(64, input_rate=100.0), gpu)
    assert slow_loader.samples_per_s <= 100.0 * (1 + 1e-9)
    assert slow_loader.bound == "input" and any("data-bound" in w for w in slow_loader.warnings)
    fast_loader = predict_step_time(cnn_trace(64, input_rate=1e9), gpu)
    assert fast_loader.step_time_s == free.step_time_s and not any("data-bound" in w for w in fast_loader.warnings)
    assert "100 samples/s" in slow_loader.stack and "synthetic data" in free.stack


def test_the_stack_string_comes_from_the_workload():
    gpu = a100_like()
    tr = mlp_trace(64)
    assert predict_step_time(tr, gpu).stack != predict_step_time(_with(tr, attention="eager"), gpu).stack
    assert "foreach optimizer" in predict_step_time(tr, gpu).stack
    assert "fused optimizer" in predict_step_time(_with(tr, optimizer_impl="fused"), gpu).stack
