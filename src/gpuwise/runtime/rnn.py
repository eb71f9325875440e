"""The kernels cuDNN's fused RNN runs (``CUDNN_RNN_ALGO_STANDARD``, what PyTorch's ``_cudnn_rnn`` picks unless
a half-precision, single-layer, unidirectional RNN meets its persistent-kernel heuristics, which keep the
recurrent weights on chip across steps: this errs slow there), from the structure of the recurrence; ``kernels.op_features`` times them with the GEMM and
streaming laws.

For every layer and direction, forward: one GEMM of the layer's input for all ``T`` steps at once
(``T*B x I -> G*H``), then ``T`` steps one after another, each a recurrent GEMM (``B x out -> G*H``; an LSTM
with a projection adds ``B x H -> P``) and one pointwise kernel (the gates' nonlinearities, the cell and
hidden update). Backward mirrors it: ``T`` sequential steps of a pointwise kernel and a recurrent data-gradient
GEMM, then the input's gradient and the weights' gradients as GEMMs over all steps. Layers and directions are
taken one after another (cuDNN may overlap them: this errs slow). What the recurrence costs a small batch is
the ``2T`` dependent kernels per layer, each paying its launch latency: that is why an LSTM rarely fills a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.trace.rnn_shape import RnnShape

Gemm = tuple[int, int, int, int]   # (batch, m, n, k)


@dataclass(frozen=True)
class RnnKernels:
    """``gemms``: (shape, how many times it runs, whether it runs once per step: its weight is read again each
    step); ``pointwise``: kernels of ``pointwise_bytes`` each."""

    gemms: tuple[tuple[Gemm, int, bool], ...]
    pointwise: int
    pointwise_bytes: float

    @property
    def kernels(self) -> int:
        return sum(n for _, n, _ in self.gemms) + self.pointwise

    def weight_rereads_bytes(self, elem_bytes: int, cache_bytes: int) -> float:
        """Bytes the per-step GEMMs read from DRAM for their weights (the n x k operand) when a weight does not
        fit in ``cache_bytes`` (the L2): every step reads it again."""
        return float(sum(n * w for (_, _, cols, k), n, per_step in self.gemms
                         if per_step and (w := cols * k * elem_bytes) > cache_bytes))


def rnn_kernels(shape: RnnShape, *, backward: bool, elem_bytes: int, weight_grad: bool = True) -> RnnKernels:
    """The kernels of one fused RNN call (``backward``: its ``_cudnn_rnn_backward``; ``weight_grad`` False: frozen
    weights, no weight-gradient GEMMs)."""
    t, b, h, out, p = shape.seq_len, shape.batch, shape.hidden, shape.out_size, shape.proj
    gh = shape.gates * h
    rows = t * b
    gemms: list[tuple[Gemm, int, bool]] = []
    for layer in range(shape.layers):
        i = shape.layer_input(layer)
        if not backward:
            gemms += [((1, rows, gh, i), 1, False), ((1, b, gh, out), t, True)]
            if p:
                gemms.append(((1, b, p, h), t, True))
        else:
            gemms += [((1, b, out, gh), t, True), ((1, rows, i, gh), 1, False)]
            if weight_grad:
                gemms += [((1, gh, i, rows), 1, False), ((1, gh, out, rows), 1, False)]
            if p:
                gemms += [((1, b, h, p), t, True)] + ([((1, p, h, rows), 1, False)] if weight_grad else [])
    gemms = [(g, n * shape.directions, per_step) for g, n, per_step in gemms]
    steps = t * shape.layers * shape.directions
    # each step reads the gates' two halves (input and recurrent parts) and the previous cell, writes the
    # activated gates (kept for backward), the cell and the hidden state
    step_bytes = b * (3 * gh + 3 * h) * elem_bytes
    return RnnKernels(tuple(gemms), steps, float(step_bytes))
