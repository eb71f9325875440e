"""Invariants of the time model, on hand-made operators and GPUs (fast: no tracing)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.runtime import CLASSES, StepTime, classify, predict_step_time
from gpuwise.runtime.calibration import Calibration, load_calibration
from gpuwise.runtime.kernels import op_time
from gpuwise.workload.precision import parse
from gpuwise.runtime.model import RuntimeError_
from runtime_fakes import a100_like, conv, make_gpu, mlp_trace, mm, pointwise, rel, t4_like

CAL = load_calibration()


@pytest.mark.parametrize("m", [1, 7, 64, 100, 129, 1000, 4096])
def test_more_flops_is_never_faster_on_the_same_gpu(m):
    gpu = a100_like()
    for precision in ("fp32", "tf32", "amp-fp16"):
        smaller = op_time(mm(m, 1024, 1024), gpu, precision, CAL).device_s
        bigger = op_time(mm(m + 1, 1024, 1024), gpu, precision, CAL).device_s
        wider = op_time(mm(m, 1024, 1100), gpu, precision, CAL).device_s
        # (equal time allowed: the extra row may fit in a tile that was already being computed)
        assert bigger >= smaller * (1 - 1e-12) and wider >= smaller * (1 - 1e-12)


def test_bigger_conv_never_faster_and_depthwise_is_bandwidth_bound():
    gpu = a100_like()
    times = [op_time(conv(n, 64, 56, 56, 64), gpu, "fp32", CAL).device_s for n in (1, 2, 8, 9, 64)]
    assert times == sorted(times)
    dw = op_time(conv(64, 256, 56, 56, 256, groups=256), gpu, "amp-fp16", CAL)
    assert dw.memory_s > dw.compute_s and dw.rate == "fp32"


def test_gpu_with_higher_peak_and_bandwidth_is_never_slower_for_the_same_op():
    # "Higher" in every rate the model uses, per GPU and per SM: a GPU with more but slower SMs
    # (V100 vs A100 at fp32) really is slower on a GEMM too small to fill one wave.
    slow = make_gpu("slow", sm=80, bw=900, fp32=14, tf32=None, fp16=112, bf16=None)
    fast = make_gpu("fast", sm=108, bw=2000, fp32=19.5, tf32=156, fp16=312, bf16=312)
    ops = [mm(128, 768, 768), mm(8192, 4096, 4096), pointwise(1 << 24), pointwise(100),
           conv(32, 64, 56, 56, 128), conv(32, 96, 112, 112, 96, groups=96)]
    for precision in ("fp32", "tf32", "amp-fp16"):
        for op in ops:
            assert op_time(op, fast, precision, CAL).device_s <= op_time(op, slow, precision, CAL).device_s
        assert (predict_step_time(mlp_trace(64, precision=precision), fast).step_time_s
                <= predict_step_time(mlp_trace(64, precision=precision), slow).step_time_s)


def test_small_gemms_reach_only_a_few_percent_of_peak():
    gpu = a100_like()
    t = op_time(mm(32, 256, 256, dtype="float16"), gpu, "amp-fp16", CAL)
    achieved_tflops = 2 * 32 * 256 * 256 / t.device_s / 1e12
    assert achieved_tflops < 0.05 * gpu.peak("fp16")
    big = op_time(mm(8192, 8192, 8192, dtype="float16"), gpu, "amp-fp16", CAL)
    assert 2 * 8192**3 / big.device_s / 1e12 > 0.4 * gpu.peak("fp16")


def test_fp32_matmuls_skip_tf32_but_convolutions_use_it_by_default():
    gpu = a100_like()
    assert parse("fp32").rate_key(gpu, "matmul") == "fp32"
    assert parse("fp32").rate_key(gpu, "conv") == "tf32"
    assert parse("tf32").rate_key(gpu, "matmul") == "tf32"
    assert parse("amp-fp16").rate_key(gpu, "matmul") == "fp16"
    assert parse("fp32").rate_key(t4_like(), "conv") == "fp32"          # no tf32 before Ampere
    assert parse("amp-bf16").rate_key(t4_like(), "matmul") == "bf16-emulated"


def test_amp_bf16_on_t4_warns_and_runs_far_slower_than_amp_fp16():
    gpu = t4_like()
    bf16 = predict_step_time(mlp_trace(256, width=2048, precision="amp-bf16"), gpu)
    fp16 = predict_step_time(mlp_trace(256, width=2048, precision="amp-fp16"), gpu)
    assert any("bf16" in w and "amp-fp16" in w for w in bf16.warnings)
    assert not any("bf16" in w for w in fp16.warnings)
    assert bf16.step_time_s > 2 * fp16.step_time_s


def test_batch_scaling_is_sub_linear_at_small_batches_and_says_launch_bound():
    gpu = a100_like()
    t1 = predict_step_time(mlp_trace(1, width=256), gpu)
    t8 = predict_step_time(mlp_trace(8, width=256), gpu)
    assert t8.step_time_s < 2 * t1.step_time_s          # 8x the samples, far less than 8x the time
    assert t8.samples_per_s > 4 * t1.samples_per_s
    assert t1.bound == "launch" and any("launch-bound" in w for w in t1.warnings)
    big = predict_step_time(mlp_trace(8192, width=4096), gpu)
    assert big.bound in ("compute", "memory") and not any("launch-bound" in w for w in big.warnings)


def test_by_class_sums_to_the_step_compute_time():
    for batch, accum in ((1, 1), (64, 1), (4096, 3)):
        st = predict_step_time(mlp_trace(batch, accum=accum), a100_like())
        assert rel(sum(st.by_class_s.values()), st.compute_s) < 1e-9
        assert set(CLASSES) <= set(st.by_class_s)
        assert st.by_class_s["matmul"] > 0 and st.by_class_s["optimizer"] > 0


def test_grad_accumulation_repeats_the_micro_step_but_not_the_optimizer():
    gpu = a100_like()
    one = predict_step_time(mlp_trace(512, accum=1), gpu)
    four = predict_step_time(mlp_trace(512, accum=4), gpu)
    assert rel(four.step_time_s, 4 * one.micro_step_s + one.optimizer_s) < 1e-9
    assert four.samples_per_s > one.samples_per_s   # the optimizer is paid once for 4x the samples


def test_multi_gpu_communication_grows_with_gradient_bytes_and_shrinks_with_nvlink():
    pcie = make_gpu("pcie", pcie=4)
    nvlink = make_gpu("nvl", nvlink=600.0)
    small = mlp_trace(8, width=1024)
    large = mlp_trace(8, width=4096)
    comm = lambda tr, g: predict_step_time(tr, g, count=8).communication_s  # noqa: E731
    assert comm(large, pcie) > comm(small, pcie) > 0
    assert comm(large, nvlink) < comm(large, pcie)
    assert predict_step_time(small, pcie, count=1).communication_s == 0.0


def test_data_parallel_throughput_counts_every_gpu_and_sharding_adds_gathers():
    gpu = make_gpu("nvl", nvlink=600.0)
    tr = mlp_trace(4096, width=2048)
    one = predict_step_time(tr, gpu)
    eight = predict_step_time(tr, gpu, count=8)
    assert eight.count == 8 and one.samples_per_s < eight.samples_per_s <= 8 * one.samples_per_s
    ddp = predict_step_time(mlp_trace(64, width=4096), make_gpu("p"), count=4)
    zero3 = predict_step_time(mlp_trace(64, width=4096, sharding="zero3"), make_gpu("p"), count=4)
    assert zero3.communication_s > ddp.communication_s


def test_views_launch_no_kernel_and_unknown_ops_cost_as_memory_bound():
    view = dataclasses.replace(pointwise(1 << 20), op="aten.view.default")
    assert classify(view) == "view" and op_time(view, a100_like(), "fp32", CAL).device_s == 0
    odd = dataclasses.replace(pointwise(1 << 20), op="aten.some_new_op.default")
    assert classify(odd) == "other" and op_time(odd, a100_like(), "fp32", CAL).device_s > 0
    foreach = pointwise(1 << 20, op="aten._foreach_mul_.Scalar", phase="backward")
    assert classify(foreach) == "optimizer"
    assert classify(dataclasses.replace(pointwise(10), phase="optimizer")) == "optimizer"


def test_step_time_to_dict_keeps_the_contract_keys():
    st = predict_step_time(mlp_trace(32), a100_like(), count=2)
    assert isinstance(st, StepTime)
    d = st.to_dict()
    for key in ("gpu", "count", "step_time_s", "samples_per_s", "by_class_s", "bound", "communication_s"):
        assert key in d
    assert d["gpu"] == "a100-test" and d["bound"] in ("compute", "memory", "launch", "communication")


def test_bad_gpu_count_is_a_clear_error():
    with pytest.raises(RuntimeError_, match="count"):
        predict_step_time(mlp_trace(8), a100_like(), count=0)


def test_calibration_round_trips_and_is_keyed_by_neither_model_nor_gpu():
    cal = load_calibration()
    again = Calibration.from_dict(cal.to_dict())
    assert again.params == cal.params
    # Parameters are per operator class only, each a factor of at most 1 (no kernel beats the datasheet).
    assert not any(name in str(cal.params) for name in ("resnet", "bert", "vit", "a100", "volta", "ampere"))
    assert all(0 < v <= 1.0 for k, v in cal.params.items() if k != "kernel_latency_s")
