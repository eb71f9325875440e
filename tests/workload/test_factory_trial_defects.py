"""A new user's trial of file.py:factory models: inputs in lists, a module beside the file, and errors that say
what is wrong (the factory's return, a forward without output, what tracing on fake tensors cannot know)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from gpuwise.trace import TraceError, trace_workload
from gpuwise.workload import Workload, WorkloadError

MODELS = textwrap.dedent('''
    import torch
    from torch import nn

    class Each(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(64, 64)
        def forward(self, xs):
            return torch.stack([self.l(x) for x in xs]).sum()

    class Unbound(Each):
        def forward(self, x):
            return torch.stack([self.l(a) for a in x.unbind(0)]).sum()

    def as_list(batch_size: int = 4):
        return Each(), ([torch.empty(128, 64) for _ in range(batch_size)],), lambda out: out

    def as_dict(batch_size: int = 4):
        class M(Each):
            def forward(self, d):
                return super().forward(d["images"])
        return M(), ({"images": [torch.empty(128, 64) for _ in range(batch_size)]},), lambda out: out

    def as_tensor(batch_size: int = 4):
        return Unbound(), (torch.empty(batch_size, 128, 64),), lambda out: out

    def loss_not_callable():
        return nn.Linear(4, 4), (torch.empty(2, 4),), "notcallable"

    def returns_none():
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.l = nn.Linear(4, 4)
            def forward(self, x):
                self.l(x)
        return M(), (torch.empty(2, 4),)

    def numpy_in_forward():
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.l = nn.Linear(4, 4)
            def forward(self, x):
                return self.l(x) * int(x.detach().cpu().numpy().shape[0])
        return M(), (torch.empty(2, 4),)

    def checks_its_inputs():
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.l = nn.Linear(4, 4)
            def forward(self, x):
                if (x[:, 2:] <= x[:, :2]).any():
                    raise ValueError("all boxes should have positive height and width")
                return self.l(x)
        return M(), (torch.empty(2, 4),)
''')


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "trial_factories.py"
    path.write_text(MODELS)
    return lambda name: f"{path}:{name}"


def _trace(model: str, **fields):
    return trace_workload(Workload(model=model, batch_size=4, **fields), use_cache=False)


@pytest.mark.parametrize("name", ["as_list", "as_dict"])
def test_example_inputs_inside_lists_and_dicts_are_made_fake_like_a_tensor(models, name):
    # was: "Expected all tensors to be on the same device, … meta and cpu!"
    nested, stacked = _trace(models(name)), _trace(models("as_tensor"))
    assert nested.flops == stacked.flops > 0


def test_a_loss_fn_that_is_not_callable_is_refused_before_tracing(models):
    # was: "TypeError: 'str' object is not callable" deep in the trace
    with pytest.raises(WorkloadError, match=r"loss_fn, must be callable .* not a str"):
        _trace(models("loss_not_callable"))


def test_a_forward_that_returns_none_says_so(models):
    # was: "IndexError: list index out of range"
    with pytest.raises(WorkloadError, match="forward returned None, no tensor to train on"):
        _trace(models("returns_none"))


def test_numpy_in_forward_is_named_a_limit_of_tracing_not_a_fault_of_the_model(models):
    with pytest.raises(TraceError, match="limit of tracing, not a fault of the model") as caught:
        _trace(models("numpy_in_forward"))
    assert "fake tensors" in str(caught.value)


def test_a_model_refusing_after_reading_tensor_values_is_told_tracing_cannot_know_them(models):
    with pytest.raises(WorkloadError, match="that tracing on fake tensors cannot know"):
        _trace(models("checks_its_inputs"))


def test_torchvision_detection_is_refused_with_why_and_no_factory_advice():
    with pytest.raises(WorkloadError) as caught:
        _trace("torchvision:fasterrcnn_resnet50_fpn")
    message = str(caught.value)
    assert "non-maximum suppression" in message and "fake tensors" in message
    assert "wrap" not in message


SIBLING_FACTORY = '''
import torch
from torch import nn
from trial_sizes import WIDTH

def factory(batch_size=2):
    return nn.Linear(WIDTH, 8), (torch.empty(batch_size, WIDTH),)
'''


def _params_from_the_cli(path, cache_dir) -> int:
    """``gpuwise estimate FILE:factory`` in a fresh process started elsewhere, the file's folder not on the path."""
    env = {**os.environ, "GPUWISE_CACHE_DIR": str(cache_dir), "GPUWISE_NO_CACHE": "0"}
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", f"{path}:factory", "--json"],
                       capture_output=True, text=True, timeout=300, env=env, cwd="/")
    assert r.returncode == 0, r.stderr
    import json
    return json.loads(r.stdout)["trace"]["param_count"]


@pytest.mark.slow
def test_a_factory_imports_the_module_beside_it_and_an_edit_there_traces_again(tmp_path):
    # was: ModuleNotFoundError unless PYTHONPATH named the folder
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "trial_sizes.py").write_text("WIDTH = 8\n")
    (folder / "trial_model.py").write_text(SIBLING_FACTORY)
    cache_dir = tmp_path / "cache"
    assert _params_from_the_cli(folder / "trial_model.py", cache_dir) == 8 * 8 + 8
    (folder / "trial_sizes.py").write_text("WIDTH = 32\n")          # the module beside it is hashed too
    assert _params_from_the_cli(folder / "trial_model.py", cache_dir) == 32 * 8 + 8
