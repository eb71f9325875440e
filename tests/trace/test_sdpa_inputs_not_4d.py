"""``F.scaled_dot_product_attention`` on inputs that are not (batch, heads, seq, dim), valid in PyTorch, traced as
torch runs them (checked on torch 2.14's dispatch, CPU and meta): 3-D (batch, seq, dim) inputs are unsqueezed to
4-D and go to the fused kernels like any others (no seq² scores kept); other shapes (5-D) run SDPA's math path,
half inputs upcast to float32, its float32 scores kept for backward.

Before the first fix the fused stand-in mis-shaped a 3-D call's output and the step failed ("Dimension out of
range"); before the second, 3-D calls were traced on the math path with scores in the inputs' dtype, which torch
runs in neither case (a review's finding)."""

from __future__ import annotations

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

MODEL = '''
import torch
from torch import nn
import torch.nn.functional as F


class SingleHead(nn.Module):
    def __init__(self, d=16, classes=10, groups=1):
        super().__init__()
        self.groups = groups
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.groups > 1:   # (groups, batch / groups, 1, seq, dim): a 5-D call
            q, k, v = (t.reshape(self.groups, -1, 1, *t.shape[1:]) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.reshape(x.shape).mean(1))


def single_head(batch_size=4):
    return SingleHead(), (torch.empty(batch_size, 64, 16),)


def grouped(batch_size=4):
    return SingleHead(groups=2), (torch.empty(batch_size, 64, 16),)


class QueryAsOneHead(SingleHead):
    def forward(self, x):   # a 4-D query over 3-D keys and values: torch's math path, a 4-D output
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(F.scaled_dot_product_attention(q.unsqueeze(0), k, v).reshape(x.shape).mean(1))


def mixed(batch_size=4):
    return QueryAsOneHead(), (torch.empty(batch_size, 64, 16),)
'''


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    path = tmp_path_factory.mktemp("sdpa3d") / "single_head.py"
    path.write_text(MODEL)
    return path


def _trace(path, factory: str, precision: str):
    return trace_workload(Workload(model=f"{path}:{factory}", batch_size=4, precision=precision, optimizer="sgd"),
                          use_cache=False)


@pytest.mark.parametrize("precision, fused", [("fp32", "aten._scaled_dot_product_efficient_attention.default"),
                                               ("amp-bf16", "aten._scaled_dot_product_flash_attention.default")])
def test_attention_on_3d_inputs_is_unsqueezed_and_fused(path, precision, fused):
    trace = _trace(path, "single_head", precision)
    forward = [op for op in trace.ops if op.phase == "forward"]
    assert [op.output_shapes[0] for op in forward if op.op == fused] == [(1, 4, 64, 16)]
    assert not [op for op in forward if op.op == "aten._softmax.default"]      # no seq² scores kept
    assert not any("math path" in note for note in trace.notes)


@pytest.mark.parametrize("precision", ["fp32", "amp-bf16"])
def test_attention_on_5d_inputs_runs_the_math_path_with_float32_scores(path, precision):
    trace = _trace(path, "grouped", precision)
    scores = [op for op in trace.ops if op.phase == "forward" and op.op == "aten._softmax.default"]
    assert [op.output_shapes[0] for op in scores] == [(2, 2, 1, 64, 64)]
    assert scores[0].output_dtypes[0] == "float32"          # SDPA's math path upcasts half inputs
    assert any("ran its math path" in note for note in trace.notes)


def test_attention_on_inputs_of_mixed_ranks_runs_the_math_path(path):
    """A second review's finding: a 4-D query over 3-D keys went to the fused stand-in (torch runs the math path and
    returns 4-D), and the reshape after it failed as if the model's code were wrong."""
    trace = _trace(path, "mixed", "fp32")
    scores = [op for op in trace.ops if op.phase == "forward" and op.op == "aten._softmax.default"]
    assert [op.output_shapes[0] for op in scores] == [(1, 4, 64, 64)]
    assert any("ran its math path" in note for note in trace.notes)
