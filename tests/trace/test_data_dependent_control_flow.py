"""A model whose own Python control flow reads tensor values (an early exit, a loop until convergence): fake
tensors answer every read True / 1, so the trace says so in a note and counts the reads (the step may be far off);
a loop that such answers never end stops in seconds with one line, and every trace has a wall-time limit."""

from __future__ import annotations

import textwrap

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.accuracy import likely_step_time_range_s
from gpuwise.runtime.predict import predict_step_time
from gpuwise.trace import TraceError, trace_workload
from gpuwise.workload import Workload, WorkloadError

# the variables docs/trace.md names (literal: what a user types)
MAX_TRACE_OPS_ENV, MAX_VALUE_READS_ENV, TRACE_TIMEOUT_ENV = (
    "GPUWISE_TRACE_MAX_OPS", "GPUWISE_TRACE_MAX_VALUE_READS", "GPUWISE_TRACE_TIMEOUT_S")

MODELS = textwrap.dedent('''
    import torch
    from torch import nn

    class Converge(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)
        def forward(self, x):
            h = self.a(x)
            while h.abs().max() > 1e-3:
                h = h * 0.5
            return h

    class Early(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(16, 16) for _ in range(6))
            self.h = nn.Linear(16, 4)
        def forward(self, x):
            for b in self.blocks:
                x = torch.relu(b(x))
                if self.h(x).softmax(-1).max() > 0.9:
                    break
            return self.h(x)

    class PerSample(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)
        def forward(self, x):
            h = self.a(x)
            return torch.stack([r if r.sum() > 0 else -r for r in h])

    def per_sample(batch_size: int = 2):
        return PerSample(), (torch.empty(batch_size, 8),)

    def converge(batch_size: int = 2):
        return Converge(), (torch.empty(batch_size, 8),)

    def early(batch_size: int = 2):
        return Early(), (torch.empty(batch_size, 16),)
''')


@pytest.fixture
def models(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_TRACE_OPS_ENV, "100000")   # a runaway loop stops here at the latest (a few seconds)
    path = tmp_path / "flow.py"
    path.write_text(MODELS)
    return path


def test_a_loop_on_tensor_values_stops_at_the_read_limit_naming_the_line_and_the_variable(models, monkeypatch):
    monkeypatch.setenv(MAX_VALUE_READS_ENV, "50")
    with pytest.raises(TraceError) as info:
        trace_workload(Workload(model=f"{models}:converge", batch_size=2, optimizer="sgd"))
    message = str(info.value)
    assert "\n" not in message
    assert "flow.py:11" in message and "more than 58 times" in message and MAX_VALUE_READS_ENV in message


def test_a_loop_over_the_batch_is_bounded_by_it_at_any_batch(models, monkeypatch):
    # from the review: the reads were counted over both steps against one fixed limit, so a loop reading one value
    # per sample was refused as never ending from batch 2,501 (here: from batch 26 at a limit of 50)
    monkeypatch.setenv(MAX_VALUE_READS_ENV, "50")
    trace = trace_workload(Workload(model=f"{models}:per_sample", batch_size=40, optimizer="sgd"))
    assert trace.control_flow_reads == 80            # one a sample, in each of the two steps


def test_the_traced_steps_have_a_wall_time_limit_of_their_own(models, monkeypatch):
    monkeypatch.setenv(MAX_VALUE_READS_ENV, "100000000")
    monkeypatch.setenv(TRACE_TIMEOUT_ENV, "1")
    with pytest.raises(WorkloadError, match=rf"did not finish within 1 s; .*set {TRACE_TIMEOUT_ENV}"):
        trace_workload(Workload(model=f"{models}:converge", batch_size=2, optimizer="sgd"))


def test_the_trace_time_limit_from_the_environment_must_be_seconds(models, monkeypatch):
    monkeypatch.setenv(TRACE_TIMEOUT_ENV, "soon")
    with pytest.raises(WorkloadError, match=f"{TRACE_TIMEOUT_ENV} is 'soon'"):
        trace_workload(Workload(model=f"{models}:early", batch_size=2, optimizer="sgd"))


def test_an_early_exit_on_tensor_values_is_said_and_counted_as_data_dependent(models):
    trace = trace_workload(Workload(model=f"{models}:early", batch_size=2, optimizer="sgd"))
    assert trace.control_flow_reads == 2          # one read in each step: the answer True breaks after block 0
    note = next(n for n in trace.notes if n.startswith("data-dependent control flow"))
    assert "flow.py:" in note and "far off, lower or higher" in note
    # the old wording, about transformers' masks, is not what this model did
    assert not any("all-ones masks" in n for n in trace.notes)
    # and no held-out likely range, on one GPU or eight: the traced path may be far from a real one
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    for count in (1, 8):
        step = predict_step_time(trace, gpu, count=count)
        assert step.regime == "data-dependent", count
        assert likely_step_time_range_s(step.step_time_s, method="traced", bound=step.bound, regime=step.regime) is None


def test_transformers_mask_checks_are_not_the_models_control_flow(data_dir):
    trace = trace_workload(Workload(model=f"hf:{data_dir / 'tiny-bert.json'}", batch_size=2, seq_len=16,
                                    optimizer="sgd"))
    assert trace.control_flow_reads == 0
    assert not any(n.startswith("data-dependent control flow") for n in trace.notes)
    assert any("all-ones masks" in n for n in trace.notes)
