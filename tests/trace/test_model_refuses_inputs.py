"""A model whose own code refuses the inputs (an image size a ViT cannot take, a pooling window larger than
the feature map) is bad input: exit 2 with one line naming the model, the inputs and the library's message,
the library's exception chained. gpuwise's own errors are not passed off as the model's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuwise.trace import ModelCodeError, TraceError, trace_workload
from gpuwise.workload import Workload, WorkloadError, spec_builders


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("command", [["estimate"], ["recommend", "--steps", "10"]])
def test_a_vit_given_an_image_size_its_patches_do_not_divide_exits_2_with_one_line(command):
    r = _cli(*command, "torchvision:vit_b_16", "--image-size", "200", "--batch-size", "2")
    line = _one_error_line(r)
    assert ("torchvision:vit_b_16 cannot run on 3×200×200 images: Input shape indivisible by patch size! "
            "(try --image-size 192 or 208: a multiple of its 16-pixel patch)") in line


def test_the_build_error_is_a_workload_error_with_the_librarys_exception_chained():
    with pytest.raises(WorkloadError) as info:
        trace_workload(Workload(model="torchvision:vit_b_16", batch_size=2, image_size=40))
    assert isinstance(info.value.__cause__, AssertionError)
    assert str(info.value).endswith("(try --image-size 32 or 48: a multiple of its 16-pixel patch)")


FACTORY = '''
import torch
from torch import nn


class PatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(3, 8, 4, stride=4)

    def forward(self, x):
        torch._assert(x.shape[-1] % 4 == 0, "Input shape indivisible by patch size!")
        return self.proj(x).flatten(1)


def patches(image_size=32):
    return PatchNet(), torch.empty(2, 3, image_size, image_size)


def pooled():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.AvgPool2d(5, stride=3)), torch.empty(2, 3, 4, 4)
'''


@pytest.fixture
def factory(tmp_path):
    path = tmp_path / "user_models.py"
    path.write_text(FACTORY)
    return path


def test_a_user_model_refusing_its_inputs_while_traced_is_bad_input(factory):
    with pytest.raises(WorkloadError) as info:
        trace_workload(Workload(model=f"{factory}:patches", batch_size=2, image_size=30, optimizer="sgd"))
    assert isinstance(info.value, ModelCodeError) and isinstance(info.value, TraceError)
    assert isinstance(info.value.__cause__, AssertionError)
    assert "cannot run on its inputs at batch size 2: Input shape indivisible by patch size!" in str(info.value)
    assert "during forward" in str(info.value)


def test_a_meta_kernel_refusing_the_shapes_prints_one_line_not_torchs_logged_traceback(factory):
    line = _one_error_line(_cli("estimate", f"{factory}:pooled", "--batch-size", "2", "--no-cache"))
    assert "Output size is too small" in line and "cannot run on" in line


def _raiser(module_name: str):
    """A function that raises ValueError, as if defined in module ``module_name``."""
    namespace = {"__name__": module_name}
    exec("def refuse(*args, **kwargs):\n    raise ValueError('refused')\n", namespace)
    return namespace["refuse"]


@pytest.mark.parametrize("module_name, model", [
    ("torchvision.models.vision_transformer", True), ("transformers.models.vit.modeling_vit", True),
    ("gpuwise_user_model_1234", True), ("gpuwise.trace.fake", False), ("gpuwise.workload.spec_builders", False),
])
def test_only_code_outside_gpuwise_counts_as_the_models(module_name, model):
    with pytest.raises(ValueError) as info:
        _raiser(module_name)()
    assert spec_builders.raised_by_model(info.value) is model


def test_gpuwise_failing_while_building_stays_a_bug(monkeypatch):
    monkeypatch.setattr(spec_builders, "_torchvision_module", _raiser("gpuwise.workload.spec_builders"))
    with pytest.raises(ValueError, match="refused") as info:
        trace_workload(Workload(model="torchvision:resnet18", batch_size=2, image_size=32))
    assert not isinstance(info.value, WorkloadError)


def test_gpuwise_failing_while_tracing_is_not_blamed_on_the_model(monkeypatch):
    monkeypatch.setattr(spec_builders, "_classification_loss", _raiser("gpuwise.workload.spec_builders"))
    with pytest.raises(TraceError, match="tracing torchvision:resnet18 failed") as info:
        trace_workload(Workload(model="torchvision:resnet18", batch_size=2, image_size=32, optimizer="sgd"))
    assert not isinstance(info.value, WorkloadError)
