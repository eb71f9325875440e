"""nn.LSTM / GRU / RNN traced as cuDNN's fused RNN (trace/rnn.py) and timed from its kernels (runtime/rnn.py).

Shapes are checked against torch's own CPU modules run on real tensors; memory against the reserve space the
rule states; time against the structure's invariants (no measured RNN run exists in shared/)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.memory import estimate_memory
from gpuwise.runtime.predict import predict_step_time
from gpuwise.runtime.rnn import rnn_kernels
from gpuwise.trace import trace_workload
from gpuwise.trace.rnn_shape import RnnShape, shape_of
from gpuwise.workload import Workload

MODELS = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, cell="LSTM", layers=1, bidirectional=False, proj=0, dropout=0.0, hidden=64):
        super().__init__()
        kw = {"proj_size": proj} if proj else {}
        self.rnn = getattr(nn, cell)(16, hidden, num_layers=layers, bidirectional=bidirectional,
                                     dropout=dropout, batch_first=True, **kw)
        self.head = nn.Linear(self.rnn.hidden_size if not proj else proj, 4)

    def forward(self, x):
        out = self.rnn(x)[0]
        return self.head(out[..., :self.head.in_features])


def lstm(batch_size=8, seq_len=20):
    return Net(), (torch.zeros(batch_size, seq_len, 16),)

def deep(batch_size=8, seq_len=20):
    return Net("LSTM", layers=3, bidirectional=True, dropout=0.1), (torch.zeros(batch_size, seq_len, 16),)

def gru(batch_size=8, seq_len=20):
    return Net("GRU", layers=2), (torch.zeros(batch_size, seq_len, 16),)

def tanh_rnn(batch_size=8, seq_len=20):
    return Net("RNN"), (torch.zeros(batch_size, seq_len, 16),)

def projected(batch_size=8, seq_len=20):
    return Net("LSTM", layers=2, proj=24), (torch.zeros(batch_size, seq_len, 16),)

def wide(batch_size=8, seq_len=20):
    return Net("LSTM", layers=2, hidden=1024), (torch.zeros(batch_size, seq_len, 16),)

class FrozenMiddle(nn.Module):
    """A trainable layer before a frozen LSTM: gradients flow through the LSTM, not into its weights."""
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(16, 16)
        self.rnn = nn.LSTM(16, 64, num_layers=2, batch_first=True)
        self.rnn.requires_grad_(False)
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        return self.head(self.rnn(self.pre(x))[0])


def frozen(batch_size=8, seq_len=20):
    return FrozenMiddle(), (torch.zeros(batch_size, seq_len, 16),)

def huge(batch_size=8, seq_len=20):
    return Net("LSTM", hidden=2048), (torch.zeros(batch_size, seq_len, 16),)


class Packed(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(16, 32, batch_first=True)

    def forward(self, x):
        lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.long)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        return self.rnn(packed)[1].sum()


def packed(batch_size=4):
    return Packed(), (torch.zeros(batch_size, 10, 16),), (lambda out: out)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("rnn") / "rnns.py"
    path.write_text(MODELS)
    return path


def _trace(models, factory, **kw):
    kw.setdefault("optimizer", "sgd")
    kw.setdefault("batch_size", 8)
    return trace_workload(Workload(model=f"{models}:{factory}", **kw))


def _rnn_ops(trace, backward=False):
    name = "gpuwise.cudnn_rnn_backward.default" if backward else "gpuwise.cudnn_rnn.default"
    return [op for op in trace.ops if op.op == name]


@pytest.mark.parametrize("factory,cell,kw", [
    ("lstm", "LSTM", {}), ("deep", "LSTM", {"num_layers": 3, "bidirectional": True, "dropout": 0.1}),
    ("gru", "GRU", {"num_layers": 2}), ("tanh_rnn", "RNN", {}), ("projected", "LSTM", {"num_layers": 2, "proj_size": 24}),
])
def test_one_fused_call_per_module_with_torchs_own_output_shapes(models, factory, cell, kw):
    trace = _trace(models, factory)
    forward, backward = _rnn_ops(trace), _rnn_ops(trace, backward=True)
    assert len(forward) == 1 and len(backward) == 1
    # what torch's CPU module returns for the same input, on real tensors
    with warnings.catch_warnings():   # "LSTM with projections is not supported with oneDNN"
        warnings.simplefilter("ignore")
        real = getattr(torch.nn, cell)(16, 64, batch_first=True, **kw)
        out, hidden = real(torch.zeros(8, 20, 16))
    states = hidden if isinstance(hidden, tuple) else (hidden,)
    assert forward[0].output_shapes[0] == tuple(out.shape)
    assert forward[0].output_shapes[1] == tuple(states[0].shape)
    if cell == "LSTM":
        assert forward[0].output_shapes[2] == tuple(states[1].shape)
    # backward gives every weight a gradient (and the input one)
    weights = len(list(real.parameters()))
    assert len(backward[0].output_shapes) == 3 + weights
    assert sorted(backward[0].output_shapes[3:]) == sorted(tuple(p.shape) for p in real.parameters())


def test_flops_are_the_cells_gemms_and_backward_twice_forward(models):
    trace = _trace(models, "lstm")
    [fwd], [bwd] = _rnn_ops(trace), _rnn_ops(trace, backward=True)
    # one layer: (T*B) rows x (input 16 + hidden 64) x 4 gates x 64, a multiply-add = 2 FLOPs
    assert fwd.flops == 2 * 20 * 8 * (16 + 64) * 4 * 64
    assert bwd.flops == 2 * fwd.flops
    # was: oneDNN's LSTM layer, 0 FLOPs
    assert trace.flops >= 3 * fwd.flops


def test_frozen_rnn_weights_skip_the_weight_gradient(models):
    # was: every weight's gradient allocated and 2x the forward's FLOPs charged for a frozen LSTM
    trace = _trace(models, "frozen")
    [fwd], [bwd] = _rnn_ops(trace), _rnn_ops(trace, backward=True)
    assert bwd.flops == fwd.flops
    assert all(shape == (0,) for shape in bwd.output_shapes[3:])
    assert bwd.attrs["weight_grad"] is False
    trained = rnn_kernels(shape_of(fwd.attrs), backward=True, elem_bytes=4)
    frozen = rnn_kernels(shape_of(bwd.attrs), backward=True, elem_bytes=4, weight_grad=False)
    assert trained.kernels - frozen.kernels == 2 * 2   # two weight-gradient GEMMs a layer


def test_training_keeps_the_reserve_space_and_inference_allocates_none(models):
    train = _trace(models, "wide", batch_size=32, seq_len=64)
    [fwd] = _rnn_ops(train)
    shape = shape_of(fwd.attrs)
    reserve = shape.reserve_elements(dropout=0.0) * 4
    # two layers x 64 steps x 32 rows x (4H gates + H cell + H hidden), float32
    assert reserve == 2 * 64 * 32 * 6 * 1024 * 4
    assert fwd.output_shapes[3] == (reserve // 4,)
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    rnn_bytes = dict(estimate_memory(train, gpu).top_modules).get("rnn", 0)
    # was: 26 MiB (oneDNN's meta kernel returns an empty workspace), under the 96 MiB the cells keep
    assert rnn_bytes >= reserve
    infer = _trace(models, "wide", batch_size=32, seq_len=64, mode="infer")
    [fwd_infer] = _rnn_ops(infer)
    assert fwd_infer.output_shapes[3] == (0,)
    assert not _rnn_ops(infer, backward=True)


def test_dropout_between_layers_adds_its_masks(models):
    shape = RnnShape("lstm", 16, 64, 0, 3, 2, 20, 8)
    assert shape.reserve_elements(0.1) - shape.reserve_elements(0.0) == 2 * 20 * 8 * 2 * 64


def test_amp_runs_the_rnn_in_half_precision_on_cast_weights(models):
    trace = _trace(models, "lstm", precision="amp-fp16")
    [fwd] = _rnn_ops(trace)
    assert set(fwd.input_dtypes) == {"float16"}
    assert fwd.output_dtypes[0] == "float16"


def test_a_packed_sequence_is_traced_at_its_padded_length_and_said(models):
    # was: "cannot trace operator aten._pack_padded_sequence.default ... its output size depends on tensor values"
    trace = _trace(models, "packed", batch_size=4)
    [fwd] = _rnn_ops(trace)
    assert shape_of(fwd.attrs).seq_len == 10 and shape_of(fwd.attrs).batch == 4
    assert fwd.output_shapes[0] == (10, 4, 32)   # time-major steps; the module returns them as 40 packed rows
    assert any("every sequence taken at its padded length" in n for n in trace.notes)
    assert trace.upper_bound_ops >= 1   # the data-dependent regime: no likely range


def test_the_kernels_follow_the_recurrence():
    shape = RnnShape("lstm", 16, 64, 0, 2, 2, 20, 8)
    fwd = rnn_kernels(shape, backward=False, elem_bytes=4)
    bwd = rnn_kernels(shape, backward=True, elem_bytes=4)
    # per layer and direction: one input GEMM + T recurrent GEMMs + T pointwise kernels
    assert fwd.kernels == 2 * 2 * (1 + 2 * 20)
    # backward: T pointwise + T recurrent dgrad + input dgrad + two weight gradients
    assert bwd.kernels == 2 * 2 * (2 * 20 + 3)
    projected = rnn_kernels(RnnShape("lstm", 16, 64, 24, 1, 1, 20, 8), backward=False, elem_bytes=4)
    assert projected.kernels == 1 + 3 * 20


def test_time_is_bound_by_the_recurrence(models):
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")

    def rnn_s(**kw):
        step = predict_step_time(_trace(models, "wide", **kw), gpu)
        assert step.regime == "rnn"
        return step.by_class_s["rnn"]

    base = rnn_s(batch_size=8, seq_len=32)
    # twice the steps: about twice the time (a sequence of dependent kernels)
    assert 1.7 < rnn_s(batch_size=8, seq_len=64) / base < 2.3
    # twice the rows at a small batch: far less than twice (each step's kernels are latency-bound)
    assert rnn_s(batch_size=16, seq_len=32) / base < 1.5


def test_a_bigger_gpu_is_not_slower_on_an_rnn(models):
    trace = _trace(models, "wide", batch_size=64, seq_len=32)
    catalog = load_catalog(user_file=False)
    times = {g: predict_step_time(trace, resolve_gpu(catalog, g)).by_class_s["rnn"]
             for g in ("t4", "a100-80gb-sxm4", "h100-80gb-sxm5")}
    assert times["h100-80gb-sxm5"] <= times["a100-80gb-sxm4"] <= times["t4"]
    assert all(math.isfinite(t) and t > 0 for t in times.values())


def test_the_reserve_gets_no_gradient_so_backward_holds_it_once(models):
    # was: autograd made a zero gradient the size of the reserve in backward (training memory ~2x the reserve)
    trace = _trace(models, "wide", batch_size=32, seq_len=64)
    [fwd] = _rnn_ops(trace)
    reserve_bytes = fwd.output_shapes[3][0] * 4
    backward_allocs = [e for e in trace.events if e.kind == "alloc" and e.phase == "backward" and e.op_index >= 0
                       and e.size_bytes == reserve_bytes]
    assert not backward_allocs


def test_a_wide_rnn_reads_its_recurrent_weights_every_step_when_they_miss_the_l2(models):
    # was: a 2048-wide LSTM (W_hh 67 MB > A100's 40 MB L2) predicted faster than reading W_hh once a step
    from gpuwise.runtime.calibration import load_calibration
    from gpuwise.runtime.kernels import op_time
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    trace = _trace(models, "huge", batch_size=32, seq_len=200, mode="infer")
    [fwd] = _rnn_ops(trace)
    t = op_time(fwd, gpu, "fp32", load_calibration())
    w_hh_bytes = 4 * 2048 * 2048 * 4
    assert w_hh_bytes > gpu.l2_bytes
    assert t.device_s >= 200 * w_hh_bytes / (gpu.memory_bandwidth_gbs * 1e9)


def test_compile_does_not_make_cudnns_own_launches_dearer(models):
    # was: each of the RNN's internal launches charged as an Inductor kernel (7 us) under --compile, > eager
    from dataclasses import replace

    from gpuwise.runtime.host import host_s
    from gpuwise.runtime.stack import DEFAULT_STACK
    compiled = replace(DEFAULT_STACK, compile=True)
    assert host_s("rnn", 500, "forward", compiled) <= host_s("rnn", 500, "forward", DEFAULT_STACK)
    gpu = resolve_gpu(load_catalog(user_file=False), "a100-80gb-sxm4")
    trace = _trace(models, "lstm", batch_size=4, seq_len=100)
    eager = predict_step_time(trace, gpu)
    step = predict_step_time(trace, gpu, workload=trace.workload.with_(compile=True))
    assert step.host_s <= eager.host_s
    assert not any("torch.compile would help" in w for w in step.warnings)


CELLS = '''
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(16, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = c = torch.zeros(x.shape[0], 32)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return self.head(h)


def cells(batch_size=8):
    return Cells(), (torch.zeros(batch_size, 10, 16),)


class GruCells(nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        self.cell = nn.GRUCell(16, 32, bias=bias)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 32)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return self.head(h)


def gru_cells(batch_size=8):
    return GruCells(), (torch.zeros(batch_size, 10, 16),)


def gru_cells_no_bias(batch_size=8):
    return GruCells(bias=False), (torch.zeros(batch_size, 10, 16),)


class PackPad(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(16, 32, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        b, t = x.shape[:2]
        packed = pack_padded_sequence(x, [t - (i % 3) for i in range(b)], batch_first=True, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=t)
        return self.head(out).mean(1)


def pack_pad(batch_size=8):
    return PackPad(), (torch.zeros(batch_size, 12, 16),)


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.rnn = nn.LSTM(16, 32, batch_first=True, bidirectional=True)
        self.head = nn.Linear(64, 4)

    def forward(self, tokens):
        b, t = tokens.shape
        packed = pack_padded_sequence(self.emb(tokens), [t - (i % 3) for i in range(b)], batch_first=True,
                                      enforce_sorted=False)
        out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=t)
        return self.head(out[:, -1])


def text_classifier(batch_size=8):
    return TextClassifier(), (torch.zeros(batch_size, 12, dtype=torch.long),)
'''


@pytest.fixture(scope="module")
def cell_models(tmp_path_factory):
    path = tmp_path_factory.mktemp("cells") / "cells.py"
    path.write_text(CELLS)
    return path


def test_an_lstm_cell_loop_runs_cudas_fused_cell_per_step(cell_models):
    # was: a dozen CPU elementwise ops (and their backward) a step
    trace = _trace(cell_models, "cells")
    fused = [op for op in trace.ops if op.op == "aten._thnn_fused_lstm_cell.default"]
    assert len(fused) == 10
    assert len([op for op in trace.ops if op.op == "aten._thnn_fused_lstm_cell_backward_impl.default"]) == 10
    assert not [op for op in trace.ops if op.phase == "forward" and op.op == "aten.sigmoid.default"]


@pytest.mark.parametrize("factory", ["gru_cells", "gru_cells_no_bias"])
def test_a_gru_cell_loop_runs_cudas_fused_cell_per_step(cell_models, factory):
    # was: the CPU's gru cell, a dozen small ops a step
    trace = _trace(cell_models, factory)
    assert len([op for op in trace.ops if op.op == "aten._thnn_fused_gru_cell.default"]) == 10
    assert len([op for op in trace.ops if op.op == "aten._thnn_fused_gru_cell_backward.default"]) == 10
    workspace = [op for op in trace.ops if op.op == "aten._thnn_fused_gru_cell.default"][0].output_shapes[1]
    assert workspace == (8, 5 * 32)


def test_a_packed_input_that_needs_a_gradient_trains(cell_models):
    # was: "during backward: ... data is not allocated yet" (torch's own pack backward reads batch_sizes' values)
    trace = _trace(cell_models, "text_classifier")
    assert _rnn_ops(trace, backward=True)
    assert any(op.phase == "backward" and op.module == "emb" for op in trace.ops)
    assert trace.upper_bound_ops >= 1


def test_pack_run_and_pad_back_traces_at_the_padded_length(cell_models):
    # was: "cannot run on its inputs ... data is not allocated yet", blaming the model
    trace = _trace(cell_models, "pack_pad")
    [fwd] = _rnn_ops(trace)
    assert (shape_of(fwd.attrs).seq_len, shape_of(fwd.attrs).batch) == (12, 8)
    assert any("every sequence taken at its padded length" in n for n in trace.notes)
