"""Training a model none of whose parameters requires grad is the user's input to fix (exit 2, one line saying
why and what to do), not a failure of tracing ("element 0 of tensors does not require grad")."""

import os
import subprocess
import sys
import textwrap

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload, WorkloadError

MODELS = textwrap.dedent("""
    import torch
    from torch import nn


    class Doubling(nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2


    def no_parameters(batch_size=4):
        return Doubling(), (torch.randn(batch_size, 16),)


    def frozen(batch_size=4):
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        model.requires_grad_(False)
        return model, (torch.randn(batch_size, 16),)
""")


@pytest.fixture()
def models(tmp_path):
    path = tmp_path / "frozen_models.py"
    path.write_text(MODELS)
    return path


@pytest.mark.parametrize(("factory", "why"), [("no_parameters", "it has no parameters"),
                                              ("frozen", "all 4 of its parameters are frozen")])
def test_training_a_model_with_nothing_to_train_is_refused_saying_why(models, factory, why):
    with pytest.raises(WorkloadError, match="nothing to train") as refused:
        trace_workload(Workload(model=f"{models}:{factory}", batch_size=4))
    assert why in str(refused.value)
    assert "--mode infer" in str(refused.value)


def test_the_same_model_estimates_its_forward_with_mode_infer(models):
    trace = trace_workload(Workload(model=f"{models}:frozen", batch_size=4, mode="infer", optimizer="none"))
    assert trace.param_count > 0 and trace.trainable_param_count == 0


def test_estimate_exits_2_with_one_line(models, tmp_path):
    env = {**os.environ, "GPUWISE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "gpuwise", "estimate", f"{models}:no_parameters", "-b", "4"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "nothing to train" in done.stderr
