"""A causal flash / memory-efficient attention kernel skips the masked blocks: it does about half the work
of a full one at long sequences, forward and backward, in the traced path and the LLM closed form alike
(both took torch's full-matrix FLOPs: llm-foundry's MPT rows at 32-64k tokens came out +84-100% slow)."""

from __future__ import annotations

import pytest

from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.geometry import causal_share
from gpuwise.runtime.kernels import op_time
from gpuwise.trace.records import OpRecord
from runtime_fakes import make_gpu

CAL = load_calibration()


def sdpa(seq: int, *, causal: bool, backward: bool = False, heads: int = 32, dim: int = 128) -> OpRecord:
    q = (4, heads, seq, dim)
    name = "aten._scaled_dot_product_flash_attention" + ("_backward" if backward else "") + ".default"
    shapes = (q, q, q, q) if backward else (q, q, q)
    return OpRecord(index=0, op=name, phase="backward" if backward else "forward", module="attn",
                    input_shapes=shapes, input_dtypes=("bfloat16",) * len(shapes), output_shapes=(q,),
                    output_dtypes=("bfloat16",), flops=0, bytes_read=3 * 4 * heads * seq * dim * 2,
                    bytes_written=4 * heads * seq * dim * 2, attrs={"attention": True, "is_causal": causal})


def test_the_causal_share_of_a_score_matrix():
    assert causal_share(1, 1) == 1.0
    assert causal_share(4096, 4096) == pytest.approx(4097 / 8192)
    assert causal_share(1, 4096) == 1.0            # one new token sees the whole cache
    assert causal_share(1024, 4096) == pytest.approx((1024 * 3072 + 1024 * 1025 / 2) / (1024 * 4096))


@pytest.mark.parametrize("backward", [False, True])
def test_a_causal_fused_kernel_takes_about_half_the_time_at_long_sequences(backward):
    gpu = make_gpu()
    full = op_time(sdpa(16384, causal=False, backward=backward), gpu, "bf16", CAL).compute_s
    causal = op_time(sdpa(16384, causal=True, backward=backward), gpu, "bf16", CAL).compute_s
    assert causal == pytest.approx(full / 2, rel=0.05)
