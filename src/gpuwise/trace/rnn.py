"""``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` as CUDA runs them: one fused cuDNN call per module.

On CPU, PyTorch runs an LSTM as oneDNN's layer (whose arithmetic torch's FLOP counter cannot see) and a
GRU cell by cell (thousands of small ops); on a CUDA GPU every full RNN is one ``aten._cudnn_rnn`` call
(``RNN.cpp``'s ``_cudnn_impl``), and its backward one ``_cudnn_rnn_backward``. Torch's own meta kernel for
``_cudnn_rnn`` allocates no reserve space and its backward has none, so the tracer routes every
``_VF.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` call (what the modules call) to two ops of its own,
``gpuwise::cudnn_rnn`` and ``gpuwise::cudnn_rnn_backward``, whose fake kernels allocate what CUDA does:

- the output (T x B x D*out), the final hidden (and cell) states;
- in training, a reserve space kept for backward. cuDNN's size is opaque (``cudnnGetRNNTrainingReserveSize``);
  it is taken as what PyTorch's own fused CUDA cells keep per step and batch row, for every layer and
  direction: an LSTM's gate workspace (4H), its cell state (H) and its hidden output (H, or the projection
  P); a GRU's workspace (5H) and hidden output (H); a plain RNN's hidden output (H)
  (``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``'s meta kernels); with dropout between layers, a
  mask of each dropped layer's output;
- in backward, the gradients of the input, the initial states and every weight.

Under CUDA autocast ``_cudnn_rnn`` runs in half precision on half-precision copies of its weights
(``autocast_mode.cpp``'s ``_cudnn_rnn_cast_reflatten``): the stand-in casts the same. A packed sequence
(``PackedSequence``) is traced with every sequence at the padded length (``pack_padded``, an upper bound: its
lengths are data), so its packed rows are T steps of the whole batch.

What the runtime model makes of the two ops (``runtime.rnn``) reads the attributes ``rnn_attrs`` gives.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator, Optional

import torch

from gpuwise.trace.rnn_shape import MODES, RnnShape

_MODE_NAMES = tuple(MODES)


def shape_of_call(mode: str, input: torch.Tensor, weights, num_layers: int, bidirectional: bool,
              batch_first: bool) -> RnnShape:
    directions = 2 if bidirectional else 1
    per_cell = len(weights) // (num_layers * directions)
    gates = MODES[mode]
    hidden = weights[0].shape[0] // gates
    proj = weights[per_cell - 1].shape[0] if per_cell in (3, 5) else 0   # w_hr last: an LSTM's projection
    # the modules batch an unbatched input before they call _VF
    seq_len, batch = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    return RnnShape(mode, int(input.shape[-1]), int(hidden), int(proj), int(num_layers), directions,
                    int(seq_len), int(batch))


# --- the two ops -----------------------------------------------------------------------------------

@torch.library.custom_op("gpuwise::cudnn_rnn", mutates_args=())
def cudnn_rnn(input: torch.Tensor, weights: list[torch.Tensor], hx: torch.Tensor, cx: Optional[torch.Tensor],
              mode: int, num_layers: int, dropout: float, train: bool, bidirectional: bool,
              batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    raise NotImplementedError("gpuwise::cudnn_rnn exists for tracing on fake tensors only")


@cudnn_rnn.register_fake
def _cudnn_rnn_fake(input, weights, hx, cx, mode, num_layers, dropout, train, bidirectional, batch_first):
    shape = shape_of_call(_MODE_NAMES[mode], input, weights, num_layers, bidirectional, batch_first)
    out_features = shape.directions * shape.out_size
    output = input.new_empty((*input.shape[:-1], out_features))
    hy = hx.new_empty(hx.shape)
    cy = cx.new_empty(cx.shape) if cx is not None else hx.new_empty((0,))
    reserve = input.new_empty((shape.reserve_elements(dropout) if train else 0,))
    return output, hy, cy, reserve


@torch.library.custom_op("gpuwise::cudnn_rnn_backward", mutates_args=())
def cudnn_rnn_backward(input: torch.Tensor, weights: list[torch.Tensor], hx: torch.Tensor,
                       cx: Optional[torch.Tensor], output: torch.Tensor, grad_output: torch.Tensor,
                       grad_hy: torch.Tensor, grad_cy: Optional[torch.Tensor], reserve: torch.Tensor, mode: int,
                       num_layers: int, dropout: float, bidirectional: bool, batch_first: bool, weight_grad: bool
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    raise NotImplementedError("gpuwise::cudnn_rnn_backward exists for tracing on fake tensors only")


@cudnn_rnn_backward.register_fake
def _cudnn_rnn_backward_fake(input, weights, hx, cx, output, grad_output, grad_hy, grad_cy, reserve, mode,
                             num_layers, dropout, bidirectional, batch_first, weight_grad):
    grad_cx = torch.empty_like(cx) if cx is not None else hx.new_empty((0,))
    # ``weight_grad`` False (frozen weights: output_mask[3]): cuDNN's weight-gradient pass is skipped
    grad_weights = [torch.empty_like(w) if weight_grad else w.new_empty((0,)) for w in weights]
    return torch.empty_like(input), torch.empty_like(hx), grad_cx, grad_weights


def _setup_context(ctx, inputs, output) -> None:
    input, weights, hx, cx, mode, num_layers, dropout, train, bidirectional, batch_first = inputs
    ctx.args = (mode, num_layers, dropout, bidirectional, batch_first)
    ctx.n_weights = len(weights)
    ctx.has_cx = cx is not None
    # the reserve has no gradient (``_cudnn_rnn``'s output_differentiability), and an unused output's gradient is
    # made as zeros inside the backward (``_cudnn_rnn_backward``), not by autograd
    ctx.mark_non_differentiable(output[3])
    ctx.set_materialize_grads(False)
    # cuDNN's backward reads the input, the weights, the initial states, the output and the reserve
    ctx.save_for_backward(input, hx, cx if cx is not None else hx.new_empty((0,)), output[0], output[3], *weights)


def _backward(ctx, grad_output, grad_hy, grad_cy, _grad_reserve):
    input, hx, cx, output, reserve, *weights = ctx.saved_tensors
    cx = cx if ctx.has_cx else None
    grad_output = torch.zeros_like(output) if grad_output is None else grad_output
    grad_hy = torch.zeros_like(hx) if grad_hy is None else grad_hy
    grad_cy = (torch.zeros_like(cx) if grad_cy is None else grad_cy) if ctx.has_cx else None
    weight_grad = any(ctx.needs_input_grad[1])
    grad_input, grad_hx, grad_cx, grad_weights = cudnn_rnn_backward(
        input, list(weights), hx, cx, output, grad_output, grad_hy, grad_cy, reserve, *ctx.args, weight_grad)
    weights_out = list(grad_weights) if weight_grad else [None] * len(weights)
    return (grad_input, weights_out, grad_hx, grad_cx if ctx.has_cx else None,
            None, None, None, None, None, None)


cudnn_rnn.register_autograd(_backward, setup_context=_setup_context)


def rnn_attrs(args: tuple) -> dict:
    """The attributes the runtime model reads from a ``gpuwise::cudnn_rnn`` call or its backward (their
    positional arguments, as the tracer records them)."""
    input, weights = args[0], args[1]
    if len(args) == 10:    # forward: (..., mode, num_layers, dropout, train, bidirectional, batch_first)
        mode, num_layers, _, _, bidirectional, batch_first = args[4:10]
    else:  # backward: (..., reserve, mode, num_layers, dropout, bidirectional, batch_first, weight_grad)
        mode, num_layers, _, bidirectional, batch_first = args[9:14]
    shape = shape_of_call(_MODE_NAMES[mode], input, weights, num_layers, bidirectional, batch_first)
    attrs = {"rnn": shape.mode, "input_size": shape.input_size, "hidden": shape.hidden, "proj": shape.proj,
             "layers": shape.layers, "directions": shape.directions, "seq_len": shape.seq_len, "batch": shape.batch}
    if len(args) > 14 and not args[14]:
        attrs["weight_grad"] = False   # frozen weights: no weight-gradient pass
    return attrs


# --- routing the modules' calls ----------------------------------------------------------------------

class CudaRnn:
    """Replaces one ``_VF`` full-RNN function by ``gpuwise::cudnn_rnn`` (``original``: what it replaced)."""

    def __init__(self, mode: str, original) -> None:
        self.mode, self.original = mode, original
        self.calls = 0

    def __call__(self, *args):
        packed_rows = None
        if isinstance(args[1], torch.Tensor) and not args[1].is_floating_point():
            # (data, batch_sizes, hx, ...): T steps of B rows each, time-major (every sequence full length)
            data, batch_sizes, hx, weights, _has_biases, num_layers, dropout, train, bidirectional = args
            steps = batch_sizes.shape[0]
            packed_rows = data.shape[0]
            input, batch_first = data.reshape(steps, packed_rows // steps, data.shape[-1]), False
        else:
            input, hx, weights, _has_biases, num_layers, dropout, train, bidirectional, batch_first = args
        self.calls += 1
        h, c = (hx[0], hx[1]) if self.mode == "lstm" else (hx, None)
        weights = list(weights)
        if torch.is_autocast_enabled("cpu"):   # the tracer's stand-in for CUDA autocast
            dtype = torch.get_autocast_dtype("cpu")
            cast = lambda t: t.to(dtype) if t is not None and t.dtype == torch.float32 else t  # noqa: E731
            input, h, c, weights = cast(input), cast(h), cast(c), [cast(w) for w in weights]
        with torch.autocast("cpu", enabled=False):
            output, hy, cy, _ = cudnn_rnn(input, weights, h, c, _MODE_NAMES.index(self.mode), num_layers,
                                          float(dropout), bool(train), bool(bidirectional), bool(batch_first))
        if packed_rows is not None:
            output = output.reshape(packed_rows, output.shape[-1])
        return (output, hy, cy) if self.mode == "lstm" else (output, hy)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``_VF.lstm_cell`` as CUDA runs it (``RNN.cpp``'s ``LSTMCell`` on a CUDA input): the two gate GEMMs, then
    one fused cell kernel (``_thnn_fused_lstm_cell``, which adds the biases) and its fused backward; on CPU it is
    a dozen elementwise ops a step."""
    igates = torch.mm(input, w_ih.t())
    hgates = torch.mm(hx[0], w_hh.t())
    hy, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(igates, hgates, hx[1], b_ih, b_hh)
    return hy, cy


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``_VF.gru_cell`` as CUDA runs it (``RNN.cpp``'s ``GRUCell`` on a CUDA input): the two gate GEMMs, then one
    fused cell kernel (``_thnn_fused_gru_cell``) and its fused backward."""
    igates = torch.mm(input, w_ih.t())
    hgates = torch.mm(hx, w_hh.t())
    hy, _ = torch.ops.aten._thnn_fused_gru_cell(igates, hgates, hx, b_ih, b_hh)
    return hy


# CUDA's fused GRU cell has no meta kernel: its shapes, as ``RNN.cu`` allocates them (a 5H workspace kept for
# backward; backward gives both gate gradients, the hidden's, and the biases' as sums over the batch).
@torch.library.register_fake("aten::_thnn_fused_gru_cell")
def _fused_gru_cell_fake(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    return hx.new_empty(hx.shape), hx.new_empty((hx.shape[0], 5 * hx.shape[1]))


@torch.library.register_fake("aten::_thnn_fused_gru_cell_backward")
def _fused_gru_cell_backward_fake(grad_hy, workspace, has_bias):
    rows, hidden = grad_hy.shape
    bias = (3 * hidden,) if has_bias else (0,)
    return (grad_hy.new_empty((rows, 3 * hidden)), grad_hy.new_empty((rows, 3 * hidden)), grad_hy.new_empty((rows, hidden)),
            grad_hy.new_empty(bias), grad_hy.new_empty(bias))


PACK_UPPER_BOUND = "_pack_padded_sequence (upper bound)"   # the recorder's count of it (Trace.upper_bound_ops)


def pack_padded(recorder, input, lengths, batch_first):
    """``_VF._pack_padded_sequence`` on fake data (its lengths are data): every sequence at full length, so the
    packed rows are T steps of the whole batch, time-major. Differentiable views and a copy, so backward never
    reaches the C++ backward that reads ``batch_sizes``' values."""
    recorder.placeholders[PACK_UPPER_BOUND] += 1
    steps = input.transpose(0, 1) if batch_first else input
    t, b = steps.shape[:2]
    return steps.reshape(t * b, *steps.shape[2:]).contiguous(), torch.full((t,), b, dtype=torch.long)


def pad_packed(data, batch_sizes, batch_first, padding_value, total_length):
    """``_VF._pad_packed_sequence`` on fake data (its C++ reads ``batch_sizes``' values): every sequence at full
    length, as ``pack_padded`` packs them, padded to ``total_length``."""
    steps = batch_sizes.shape[0]
    rows = data.shape[0] // steps
    padded = data.reshape(steps, rows, *data.shape[1:]).clone()
    if total_length > steps:
        pad = data.new_full((total_length - steps, rows, *data.shape[1:]), padding_value)
        padded = torch.cat([padded, pad])
    lengths = torch.full((rows,), steps, dtype=torch.long)
    return (padded.transpose(0, 1) if batch_first else padded), lengths


@contextlib.contextmanager
def cuda_rnns(recorder) -> Iterator[list[CudaRnn]]:
    """Routes ``torch._VF``'s full-RNN functions to ``CudaRnn`` for the duration (what ``nn.LSTM``, ``nn.GRU``
    and ``nn.RNN`` call), ``lstm_cell`` / ``gru_cell`` to CUDA's fused cells and the packing of sequences to its
    upper bound (counted in ``recorder``'s placeholders); yields the RNN stand-ins (``calls``)."""
    vf = torch._VF
    stand_ins = [CudaRnn(mode, getattr(vf, mode)) for mode in MODES]
    others = {"lstm_cell": lstm_cell, "gru_cell": gru_cell, "_pad_packed_sequence": pad_packed,
              "_pack_padded_sequence": functools.partial(pack_padded, recorder)}
    for s in stand_ins:
        setattr(vf, s.mode, s)
    for name, fn in others.items():
        setattr(vf, name, fn)
    try:
        yield stand_ins
    finally:
        for name in (*(s.mode for s in stand_ins), *others):
            delattr(vf, name)   # torch._VF resolves the name from torch._C again
