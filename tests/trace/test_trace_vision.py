"""A real torchvision ResNet-18 training step traced on fake tensors."""

import pytest

from gpuwise.trace import TraceError, trace_workload
from gpuwise.workload import Workload

from trace_helpers import live_bytes_after, peak_live_bytes


@pytest.fixture(scope="module")
def resnet_train():
    return trace_workload(Workload(model="torchvision:resnet18", batch_size=2, image_size=64, optimizer="adamw"))


@pytest.fixture(scope="module")
def resnet_infer():
    return trace_workload(Workload(model="torchvision:resnet18", batch_size=2, image_size=64, mode="infer"))


def test_measured_step_has_every_phase_with_conv_flops(resnet_train):
    phases = {op.phase for op in resnet_train.ops}
    assert {"forward", "backward", "optimizer"} <= phases
    convs = [op for op in resnet_train.ops if op.op == "aten.convolution.default"]
    assert len(convs) == 20
    # conv1: 2 * N * Cout * Hout * Wout * Cin * k * k
    assert convs[0].flops == 2 * 2 * 64 * 32 * 32 * 3 * 7 * 7
    assert convs[0].attrs["stride"] == (2, 2) and convs[0].module == "conv1"
    assert resnet_train.param_count == resnet_train.trainable_param_count == 11_689_512


def test_weights_are_allocated_once_at_the_parameters_size(resnet_train):
    weights = [e for e in resnet_train.events if e.category == "weights" and e.kind == "alloc"]
    params_and_buffers = sum(e.size_bytes for e in weights)
    assert params_and_buffers >= 4 * resnet_train.param_count
    assert all(e.op_index == -1 for e in weights)


def test_nothing_but_weights_and_optimizer_state_survives_the_step(resnet_train):
    left = live_bytes_after(resnet_train.events)
    assert set(left) == {"weights", "optimizer"}
    assert left["optimizer"] == 2 * 4 * resnet_train.trainable_param_count   # AdamW: exp_avg + exp_avg_sq


def test_gradients_are_the_size_of_the_trainable_parameters(resnet_train):
    grads = [e for e in resnet_train.events if e.category == "gradients" and e.kind == "alloc"]
    assert sum(e.size_bytes for e in grads) == 2 * 4 * resnet_train.trainable_param_count   # two steps


def test_frees_follow_their_allocations_with_the_same_size(resnet_train):
    allocated = {}
    for e in resnet_train.events:
        if e.kind == "alloc":
            assert e.block_id not in allocated
            allocated[e.block_id] = e.size_bytes
        else:
            assert allocated.pop(e.block_id) == e.size_bytes
    assert [e.seq for e in resnet_train.events] == list(range(len(resnet_train.events)))


def test_foreach_optimizer_ops_count_their_cuda_launches(resnet_train):
    foreach = [op for op in resnet_train.ops if op.op.startswith("aten._foreach_")]
    assert foreach and all(op.phase == "optimizer" for op in foreach)
    # 62 parameter tensors: more than one launch for the big lists, never one per tensor.
    assert all(1 <= op.kernel_count < 62 for op in foreach if len(op.input_shapes) >= 62)


def test_views_launch_no_kernel_and_move_no_bytes(resnet_train):
    views = [op for op in resnet_train.ops if op.op in ("aten.view.default", "aten.t.default")]
    assert views and all(op.kernel_count == 0 and op.bytes_written == 0 for op in views)


def test_infer_needs_no_backward_no_optimizer_and_less_memory(resnet_train, resnet_infer):
    assert {op.phase for op in resnet_infer.ops} == {"forward"}
    assert {e.category for e in resnet_infer.events} <= {"weights", "inputs", "activations"}
    assert peak_live_bytes(resnet_infer.events) < peak_live_bytes(resnet_train.events)
    assert set(live_bytes_after(resnet_infer.events)) == {"weights"}


def test_channels_last_reaches_the_convolutions():
    trace = trace_workload(Workload(model="torchvision:resnet18", batch_size=2, image_size=32, optimizer="sgd",
                                    channels_last=True))
    # (1x1 feature maps are laid out the same either way)
    convs = [op for op in trace.ops if op.op == "aten.convolution.default" and op.input_shapes[0][2] > 1]
    assert convs and all(op.attrs["channels_last"] for op in convs)


def test_a_model_error_names_the_module_it_happened_in():
    # Real PyTorch refuses batch norm over one value per channel in training; so must the trace.
    with pytest.raises(TraceError, match=r"module 'bn1'|module 'layer4.1.bn2'|Expected more than 1 value"):
        trace_workload(Workload(model="torchvision:resnet18", batch_size=1, image_size=32, optimizer="sgd"))
