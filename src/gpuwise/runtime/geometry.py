"""The geometry of a traced operator: the GEMMs a matmul, a convolution or an attention call runs, read from
the record's shapes and attributes (no GPU, no law). ``runtime.kernels`` times what these describe."""

from __future__ import annotations

import math

from gpuwise.trace.records import OpRecord


def input_shape(op: OpRecord, i: int) -> tuple[int, ...]:
    return op.input_shapes[i] if i < len(op.input_shapes) else ()


def gemm_dims(op: OpRecord) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a matmul-class op; zeros when the shapes don't say."""
    shapes = [s for s in op.input_shapes if len(s) >= 2]
    if len(shapes) < 2:
        return 0, 0, 0, 0
    a, b = shapes[-2], shapes[-1]
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    return batch, a[-2], b[-1], a[-1]


def conv_shapes(op: OpRecord):
    """(input, weight, output) shapes of a convolution or its backward."""
    backward = "backward" in op.op
    x = input_shape(op, 1 if backward else 0)
    w = input_shape(op, 2 if backward else 1)
    out = input_shape(op, 0) if backward else (op.output_shapes[0] if op.output_shapes else ())
    return x, w, out


def conv_dims(op: OpRecord) -> tuple[int, int, int, int, int]:
    """(implicit-GEMM m, n, k, input channels per group, groups) of a convolution (or its backward)."""
    x, w, out = conv_shapes(op)
    if len(x) < 3 or len(w) < 3 or len(out) < 3:
        return 0, 0, 0, 0, 1
    groups = int(op.attrs.get("groups", 0) or 0) or max(1, x[1] // max(1, w[1]))
    return out[0] * math.prod(out[2:]), out[1], math.prod(w[1:]), w[1], groups


def conv_gemms(op: OpRecord) -> list[tuple[str, tuple[int, int, int, int]]]:
    """The (kind, (batch, m, n, k)) GEMMs a convolution runs as: "fprop", or backward's "dgrad" and
    "wgrad" ("gemm" for a 1x1 stride-1 convolution's fprop or dgrad: a plain GEMM).

    Backward kernels are the GEMMs of the transposed shapes: dgrad (N H W) x Cin over Cout k k,
    wgrad Cout x (Cin k k) over N Ho Wo; each only where the op returns that gradient.
    """
    x, w, out = conv_shapes(op)
    if len(x) < 3 or len(w) < 3 or len(out) < 3:
        return []
    groups = int(op.attrs.get("groups", 0) or 0) or max(1, x[1] // max(1, w[1]))
    window = math.prod(w[2:])
    cin_g, cout_g = w[1], out[1] // groups
    out_pixels = out[0] * math.prod(out[2:])
    pointwise = window == 1 and tuple(op.attrs.get("stride", (1,))) in ((1,), (1, 1))
    if "backward" not in op.op:
        return [("gemm" if pointwise else "fprop", (groups, out_pixels, cout_g, cin_g * window))]
    outs = list(op.output_shapes)
    want_dx, want_dw = x in outs, w in outs
    if not (want_dx or want_dw):
        want_dx = want_dw = True
    gemms = []
    if want_dx:
        gemms.append(("gemm" if pointwise else "dgrad", (groups, x[0] * math.prod(x[2:]), cin_g, cout_g * window)))
    if want_dw:
        gemms.append(("wgrad", (groups, cout_g, cin_g * window, out_pixels)))
    return gemms


def conv_flops(op: OpRecord) -> int:
    """FLOPs of a convolution or its backward from the shapes, groups included.

    torch's flop formula for ``convolution_backward`` counts the weight gradient of a grouped
    convolution as if it were dense (x ``groups``: 768x too much for a ConvNeXt depthwise layer),
    so conv FLOPs are recomputed here; the trace's figure is kept where the shapes don't say.
    """
    gemms = conv_gemms(op)
    if not gemms:
        return op.flops
    return sum(2 * b * m * n * k for _, (b, m, n, k) in gemms)


def attention_dims(op: OpRecord) -> tuple[int, int, int, int]:
    """(batch x heads, query length, key length, head dim) of an SDPA op."""
    backward = "backward" in op.op
    q, k = input_shape(op, 1 if backward else 0), input_shape(op, 2 if backward else 1)
    if len(q) < 3 or len(k) < 3:
        return 0, 0, 0, 0
    return math.prod(q[:-2]), q[-2], k[-2], q[-1]


def causal_share(q_len: int, k_len: int) -> float:
    """The share of the q_len x k_len score matrix a causal fused kernel computes: query i (of q_len, the
    last ones of k_len keys) sees k_len - q_len + i keys; flash and memory-efficient kernels skip the
    masked blocks ((s + 1) / 2s of a square matrix)."""
    if q_len <= 0 or k_len <= 0:
        return 1.0
    q = min(q_len, k_len)
    return (q * (k_len - q) + q * (q + 1) / 2) / (q * k_len)


def attention_flops(op: OpRecord) -> int:
    """FLOPs of SDPA where the trace has none (the CPU kernels have no formula)."""
    bh, q_len, k_len, d = attention_dims(op)
    fwd = 4 * bh * q_len * k_len * d
    return int(fwd * 2.5) if "backward" in op.op else fwd
