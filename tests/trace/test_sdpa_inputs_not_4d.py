"""``F.scaled_dot_product_attention`` on (batch, seq, dim) inputs, valid in PyTorch: CUDA's fused kernels take
4-D inputs only, so such a call runs SDPA's math path, keeping its seq² scores (before, the trace's fused
stand-in mis-shaped the output and the step failed: "Dimension out of range")."""

from __future__ import annotations

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

MODEL = '''
import torch
from torch import nn
import torch.nn.functional as F


class SingleHead(nn.Module):
    def __init__(self, d=16, classes=10):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, classes)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(F.scaled_dot_product_attention(q, k, v).mean(1))


def single_head(batch_size=4):
    return SingleHead(), (torch.empty(batch_size, 64, 16),)
'''


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("sdpa3d") / "single_head.py"
    path.write_text(MODEL)
    return f"{path}:single_head"


@pytest.mark.parametrize("precision, scores_dtype", [("fp32", "float32"), ("amp-bf16", "bfloat16")])
def test_attention_on_3d_inputs_runs_the_math_path_and_keeps_its_scores(spec, precision, scores_dtype):
    trace = trace_workload(Workload(model=spec, batch_size=4, precision=precision, optimizer="sgd"), use_cache=False)
    scores = [op for op in trace.ops if op.phase == "forward" and op.op == "aten._softmax.default"]
    assert [op.output_shapes[0] for op in scores] == [(4, 64, 64)]
    assert scores[0].output_dtypes[0] == scores_dtype      # inside SDPA autocast does not upcast the softmax
    assert any("ran its math path" in note for note in trace.notes)
    assert not any("fused kernels (" in note for note in trace.notes)
