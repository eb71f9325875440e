"""Factories whose models gpuwise must size itself: lazy modules (nn.LazyLinear, nn.LazyBatchNorm2d) take their
shapes from one forward of the example inputs before the trace, as a first real forward gives them; a lazy first
layer without inputs, or a forward that cannot shape them, is refused in one line; a Conv3d first layer without
inputs gets a clip of frames guessed, as a Conv2d gets an image."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload, WorkloadError

MODELS = '''
import torch
from torch import nn


def lazy_cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))


def make_lazy(batch_size=2):
    return lazy_cnn(), (torch.randn(batch_size, 3, 16, 16),)


def make_lazy_first():
    return nn.Sequential(nn.LazyLinear(64), nn.ReLU(), nn.Linear(64, 10))


class ReadsValues(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.LazyLinear(4)

    def forward(self, x):
        return self.fc(x) * float(x.sum().item() > 0)


def make_reads_values(batch_size=2):
    return ReadsValues(), (torch.randn(batch_size, 16),)


class Unreached(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)
        self.spare = nn.LazyLinear(3)       # registered, never called by forward

    def forward(self, x):
        return self.fc(x)


def make_unreached(batch_size=2):
    return Unreached(), (torch.randn(batch_size, 16),)


def make_clip():
    return nn.Sequential(nn.Conv3d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                         nn.Linear(8, 10))
'''


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "sized_here.py"
    path.write_text(MODELS)
    return path


def _trace(models, factory, **kw):
    return trace_workload(Workload(model=f"{models}:{factory}", batch_size=2, optimizer="sgd", **kw), use_cache=False)


def _eager_param_count(models) -> int:
    """The parameters the lazy model has once PyTorch itself has run it on a real input of the example's shape."""
    namespace: dict = {}
    exec(compile(models.read_text(), str(models), "exec"), namespace)
    module, (example,) = namespace["make_lazy"]()
    with torch.no_grad():
        module(example)
    return sum(p.numel() for p in module.parameters())


def test_lazy_modules_are_shaped_by_the_example_inputs_as_a_real_forward_shapes_them(models):
    trace = _trace(models, "make_lazy")
    assert trace.param_count == _eager_param_count(models)
    assert "lazy modules (1, 4) shaped by one forward of the example inputs on meta tensors, as their first real " \
           "forward would" in trace.notes
    assert trace.ops, "the step ran"


def test_a_lazy_first_layer_without_example_inputs_is_refused_in_one_line(models):
    with pytest.raises(WorkloadError, match=r"cannot guess them: its first layer, LazyLinear, takes its input's "
                                            r"size from the first forward; return \(module, example_inputs\)") as info:
        _trace(models, "make_lazy_first")
    assert "\n" not in str(info.value)


def test_a_lazy_model_whose_forward_cannot_run_shape_only_is_told_to_materialise_it_in_the_factory(models):
    with pytest.raises(WorkloadError, match="its lazy modules take their sizes from a first forward") as info:
        _trace(models, "make_reads_values")
    message = str(info.value)
    assert "give the lazy layers their sizes (nn.Linear(in, out) for nn.LazyLinear)" in message
    assert "\n" not in message


def test_a_lazy_module_the_forward_never_reaches_is_refused(models):
    with pytest.raises(WorkloadError, match=r"lazy modules the forward of the example inputs does not reach have no "
                                            r"shape \(spare\); give the lazy layers their sizes"):
        _trace(models, "make_unreached")


def test_a_conv3d_first_layer_gets_a_clip_of_frames_at_the_image_size(models):
    trace = _trace(models, "make_clip", image_size=32)
    from gpuwise.workload.spec_builders import GUESSED_CLIP_FRAMES   # after the trace: before the guess, none was

    shape = (2, 3, GUESSED_CLIP_FRAMES, 32, 32)
    note = next(n for n in trace.notes if n.startswith("factory gave no inputs"))
    assert f"guessed {shape} float32 from its first layer (Conv3d)" in note
    assert f"{GUESSED_CLIP_FRAMES} frames of 32x32 px (the frame count assumed)" in note
    assert dict(trace.input_sizes)["image_size"] == 32
    convs = [op for op in trace.ops if "convolution" in op.op and op.phase == "forward"]
    assert convs and len(convs[0].input_shapes[0]) == 5
