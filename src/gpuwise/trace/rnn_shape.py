"""The structure of one fused RNN call (a cuDNN ``_cudnn_rnn``), as plain numbers: what the tracer records
(``trace/rnn.py``) and the time model reads (``runtime/rnn.py``), without torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

MODES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}   # gates per step


@dataclass(frozen=True)
class RnnShape:
    """What one fused RNN call computes: ``seq_len`` steps of ``batch`` rows through ``layers`` layers of
    ``directions`` directions; each cell maps an input (``input_size`` for layer 0, ``directions * out_size``
    above) and its previous hidden state (``out_size``) to ``gates * hidden`` pre-activations; an LSTM with a
    projection projects ``hidden`` to ``proj`` (``out_size``)."""

    mode: str
    input_size: int
    hidden: int
    proj: int
    layers: int
    directions: int
    seq_len: int
    batch: int

    @property
    def gates(self) -> int:
        return MODES[self.mode]

    @property
    def out_size(self) -> int:
        return self.proj or self.hidden

    def layer_input(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.directions * self.out_size

    def forward_flops(self) -> int:
        """Multiply-adds x 2 of every GEMM of the forward: the input GEMM of each layer over all steps, the
        recurrent GEMM of each step (and the projection)."""
        rows = self.seq_len * self.batch
        per_dir = sum(2 * rows * self.gates * self.hidden * (self.layer_input(l) + self.out_size)
                      + (2 * rows * self.hidden * self.proj if self.proj else 0)
                      for l in range(self.layers))
        return per_dir * self.directions

    def reserve_elements(self, dropout: float) -> int:
        """Elements of the training reserve space (see the module's docstring)."""
        h = self.hidden
        per_row = {"lstm": 4 * h + h + self.out_size, "gru": 5 * h + h}.get(self.mode, h)
        rows = self.seq_len * self.batch
        masks = (self.layers - 1) * rows * self.directions * self.out_size if dropout > 0 else 0
        return self.layers * self.directions * rows * per_row + masks


def shape_of(attrs: Mapping[str, object]) -> RnnShape:
    """The ``RnnShape`` an op record's attributes (``trace.rnn.rnn_attrs``) describe."""
    return RnnShape(str(attrs["rnn"]), *(int(attrs[k]) for k in ("input_size", "hidden", "proj", "layers",
                                                                 "directions", "seq_len", "batch")))
