"""A new user's trial with less common models (their own factories): what the trace must do with each.

Each test writes its own small model file; nothing is downloaded."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.accuracy import likely_step_time_range_s
from gpuwise.runtime.predict import predict_step_time
from gpuwise.trace import ModelCodeError, TraceError, trace_workload
from gpuwise.workload import Workload, WorkloadError

MODELS = '''
import torch
from torch import nn
import torch.nn.functional as F


class Looped(nn.Module):
    """Leaf layers in a ModuleList, looped in forward: the list itself is never called."""
    def __init__(self, d=32, n=4):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)


def looped(batch_size=4):
    return Looped(), (torch.empty(batch_size, 32),)


class Functional(nn.Module):
    """Its only layer's weight is used directly: no module forward runs."""
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 10)

    def forward(self, x):
        return F.linear(x, self.proj.weight, self.proj.bias)


def functional(batch_size=4):
    return Functional(), (torch.empty(batch_size, 32),)


class SparseEmb(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 16, sparse=True)
        self.head = nn.Linear(16, 10)

    def forward(self, ids):
        return self.head(self.emb(ids).mean(1))


def sparse(batch_size=4):
    return SparseEmb(), (torch.zeros(batch_size, 8, dtype=torch.long),)


class MoE(nn.Module):
    def __init__(self, d=16, experts=4):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList([nn.Linear(d, d) for _ in range(experts)])
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        _, idx = torch.topk(self.gate(x), 2, -1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            sel = (idx == e).any(-1).nonzero().squeeze(-1)
            out = out.index_add(0, sel, expert(x.index_select(0, sel)))
        return self.head(out)


def moe(batch_size=8):
    return MoE(), (torch.empty(batch_size, 16),)


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 10)

    def forward(self, x, mask):
        return self.head(self.att(x, x, x, attn_mask=mask, need_weights=False)[0].mean(1))


def masked():
    return Masked(), (torch.empty(2, 6, 16), torch.zeros(6, 6, dtype=torch.bool))


class Pairs(nn.Module):
    """Takes two inputs that must share their first dimension with a fixed table."""
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 10)

    def forward(self, x, table):
        return self.head(x + table.sum(0))


def pairs():
    return Pairs(), (torch.empty(2, 16), torch.empty(2, 3, 16))


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        raise RuntimeError("boom in forward")


def raises(batch_size=2):
    return Raises(), (torch.empty(batch_size, 16),)


class ShapeBug(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(x.view(-1, 15))


def shape_bug(batch_size=2):
    return ShapeBug(), (torch.empty(batch_size, 16),)

class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(16, 32, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0].sum()


def recurrent(batch_size=4):
    return Recurrent(), (torch.zeros(batch_size, 10, 16),)
'''


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "trial.py"
    path.write_text(MODELS)
    return path


def _trace(models, factory, **kw):
    kw.setdefault("optimizer", "sgd")
    return trace_workload(Workload(model=f"{models}:{factory}", **kw))


def _recomputed_linears(trace) -> int:
    """Transposes of a Linear's weight in backward: its own gradient's, plus one per recomputed forward
    (torch's non-reentrant checkpoint stops recomputing once it has what backward saved: the weight's t)."""
    return sum(1 for op in trace.ops if op.phase == "backward" and op.op == "aten.t.default")


def test_grad_checkpointing_checkpoints_the_leaf_layers_a_module_list_loops_over(models):
    plain = _trace(models, "looped", batch_size=4)
    ckpt = _trace(models, "looped", batch_size=4, grad_checkpointing=True)
    # each checkpointed Linear runs its forward again in backward, once per layer of the list
    assert _recomputed_linears(ckpt) - _recomputed_linears(plain) == 4
    assert "gradient checkpointing: torch.utils.checkpoint around 4 blocks" in ckpt.notes


def test_grad_checkpointing_says_nothing_was_checkpointed_when_no_wrapped_forward_ran(models):
    trace = _trace(models, "functional", batch_size=4, grad_checkpointing=True)
    note = next(n for n in trace.notes if n.startswith("gradient checkpointing"))
    assert "nothing checkpointed" in note and "around" not in note
    assert _recomputed_linears(trace) == _recomputed_linears(_trace(models, "functional", batch_size=4))


def test_a_sparse_embedding_in_training_is_refused_in_one_line(models):
    with pytest.raises(TraceError) as info:
        _trace(models, "sparse", batch_size=4)
    message = str(info.value)
    assert "sparse gradients are not supported" in message and "'emb'" in message and "\n" not in message


def test_a_sparse_embedding_is_traced_for_inference(models):
    trace = _trace(models, "sparse", batch_size=4, mode="infer")
    assert any(op.op == "aten.embedding.default" for op in trace.ops)


def test_data_dependent_routing_marks_the_trace_an_upper_bound(models):
    trace = _trace(models, "moe", batch_size=8)
    assert trace.upper_bound_ops >= 4      # one nonzero per expert (and its backward's)
    assert any("nonzero (upper bound)" in n and "memory and time are upper bounds" in n for n in trace.notes)
    assert _trace(models, "looped", batch_size=4).upper_bound_ops == 0


def test_an_upper_bound_trace_gets_no_held_out_likely_range(models):
    # was: the MoE's all-experts upper bound printed "likely 19.2-35.6 ms (8 in 10 held-out public runs)"
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    step = predict_step_time(_trace(models, "moe", batch_size=8), gpu)
    assert step.regime == "data-dependent"
    assert likely_step_time_range_s(step.step_time_s, method="traced", bound=step.bound, regime=step.regime) is None
    plain = predict_step_time(_trace(models, "looped", batch_size=4), gpu)
    assert plain.regime != "data-dependent"


def test_an_lstm_is_said_to_be_traced_as_cudnns_rnn_and_gets_no_held_out_range(models):
    # was: oneDNN's LSTM layer (0 FLOPs) timed as a memory-bound op, with the big-batch regime's likely range
    trace = _trace(models, "recurrent", batch_size=4)
    assert trace.rnn_modules == 1
    assert any("nn.LSTM/GRU/RNN traced as cuDNN's fused RNN" in n for n in trace.notes)
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    step = predict_step_time(trace, gpu)
    assert step.regime == "rnn"
    assert likely_step_time_range_s(step.step_time_s, method="traced", bound=step.bound, regime=step.regime) is None
    assert _trace(models, "looped", batch_size=4).rnn_modules == 0


def test_without_batch_size_only_inputs_sharing_the_examples_batch_are_resized_and_said(models):
    trace = _trace(models, "masked", batch_size=5)
    attention = [op for op in trace.ops if op.phase == "forward" and op.module == "att"]
    assert any((5, 6, 16) in op.input_shapes for op in attention)
    note = next(n for n in trace.notes if "takes no batch_size" in n)
    assert "input 0 (2, 6, 16) -> (5, 6, 16)" in note and "kept" in note and "input 1 (6, 6)" in note
    assert "batch_size parameter" in note


def test_a_model_failing_on_inputs_gpuwise_resized_says_so_and_how_to_avoid_it(models):
    with pytest.raises(ModelCodeError) as info:
        _trace(models, "pairs", batch_size=5)
    message = str(info.value)
    assert "cannot run on its inputs at batch size 5" in message
    assert "gpuwise set the first dimension to the batch size" in message
    assert "input 1 (2, 3, 16) -> (5, 3, 16)" in message and "give it a batch_size parameter" in message


def test_a_model_raising_by_itself_is_named_with_the_exception_type_not_blamed_on_its_inputs(models):
    with pytest.raises(ModelCodeError) as info:
        _trace(models, "raises", batch_size=2)
    message = str(info.value)
    assert "raised RuntimeError: boom in forward" in message
    assert "cannot run on its inputs" not in message
    assert isinstance(info.value, WorkloadError)


def test_a_torch_operator_refusing_a_shape_still_blames_the_inputs(models):
    with pytest.raises(ModelCodeError) as info:
        _trace(models, "shape_bug", batch_size=2)
    assert "cannot run on its inputs at batch size 2" in str(info.value)
