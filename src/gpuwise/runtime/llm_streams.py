"""The memory-bound kernels of a decoder LLM's step, by shape, and the shapes one GPU's kernels see.

Counted from the traces of transformers' eager layers (``gpuwise.trace``), as bytes the CUDA kernels move over
the whole micro-batch and kernels launched: RMSNorm as transformers writes it (a float32 upcast, a power, a
mean, rsqrt, two multiplies and a downcast; its backward 14-16 kernels) or one LayerNorm kernel; rotary
embedding (multiply, negate, concatenate, multiply, add for q and k); the KV-cache update; the activation
(SiLU and the gate's multiply, or GELU); residual adds and the gradient sums where one input feeds several
linears; bias gradients; LoRA's dropout, scaling and sums; autocast's casts of float32 weights and inputs; the
float32 loss (``--logits fp32``; 16-bit otherwise). ``--engine vllm`` serving: its fused kernels (add +
RMSNorm, rotary in place, SiLU x up, the cache write). ``Streams`` times each class once for all its kernels
with ``gpuwise.runtime.kernels``' streaming laws and kernel latency, as a traced op of those bytes is timed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping

from gpuwise.runtime.calibration import Calibration
from gpuwise.runtime.kernels import device_time_s, streaming_features
from gpuwise.workload.decoder import DecoderArch, LinearSpec

F32 = 4
TENSOR = ("matmul", "attention")
# Decoders without rotary position embedding (ALiBi or learned positions).
NO_ROTARY = {"mpt", "gpt2", "opt", "bloom", "gpt_bigcode"}
# Small kernels of the model's forward before the first layer (transformers' Llama: position ids, the
# causal-mask check, rotary cos/sin), counted in its trace; they cost their latency.
SETUP_KERNELS = {True: 13, False: 3}
COLUMN_SPLIT_ROLES = ("o", "down")   # tensor parallelism splits these linears' input, the others' output


@dataclass(frozen=True)
class KernelTime:
    """GPU time of a set of kernels on one GPU, by class (``gpuwise.runtime.classify``'s names), latency included."""

    by_class_s: Mapping[str, float] = field(default_factory=dict)
    kernels: int = 0

    @property
    def total_s(self) -> float:
        return sum(self.by_class_s.values())

    @property
    def tensor_s(self) -> float:
        """GEMMs and attention."""
        return sum(s for c, s in self.by_class_s.items() if c in TENSOR)

    @property
    def streaming_s(self) -> float:
        """Memory-bound kernels (norms, activations, copies, the loss)."""
        return self.total_s - self.tensor_s

    def __add__(self, other: "KernelTime") -> "KernelTime":
        merged = defaultdict(float, self.by_class_s)
        for c, s in other.by_class_s.items():
            merged[c] += s
        return KernelTime(dict(merged), self.kernels + other.kernels)


NONE = KernelTime()


@dataclass(frozen=True)
class Shape:
    """What one GPU's kernels see: tokens, sequence length, per-token widths of its shards, element bytes."""

    arch: DecoderArch
    tokens: int
    seq: int
    tp: int
    elem: int               # activation bytes
    gpu: object
    rate: str
    cal: Calibration
    training: bool
    attention: str = "sdpa"
    fused: bool = False     # vLLM's fused kernels (add + RMSNorm, rotary in place, SiLU x up, cache write)
    lora_rank: int = 0
    cache: bool = True      # the KV cache is updated (transformers turns it off under gradient checkpointing)
    # autocast (half GEMM operands, cast per call) over float32 weights: LoRA's adapters (``amp``), the blocks'
    # (with a float32 residual stream: full fine-tuning; frozen weights are loaded in 16 bits) and the LM head's
    amp: bool = False
    amp_blocks: bool = False
    amp_head: bool = False

    @property
    def stream(self) -> int:
        """Bytes of the residual stream's elements: float32 under autocast over a float32 model."""
        return F32 if self.amp_blocks else self.elem

    @property
    def h(self) -> int:
        return self.arch.hidden_size

    @property
    def q(self) -> int:
        return split(self.arch.q_dim, self.tp)

    @property
    def kv(self) -> int:
        return split(self.arch.kv_dim, self.tp)

    @property
    def v_out(self) -> int:
        a = self.arch
        return split(a.num_heads * (a.v_head_dim if a.is_mla else a.head_dim), self.tp)

    def mlp_width_all_layers(self) -> int:
        """Sum over layers of the MLP's intermediate width per token (MoE: top-k experts and the shared one)."""
        a = self.arch
        dense = (a.num_layers - a.num_moe_layers) * a.intermediate_size
        moe = a.num_moe_layers * (a.moe_intermediate_size * a.experts_per_token + a.shared_intermediate_size)
        return split(dense + moe, self.tp)


def split(width: int, tp: int) -> int:
    return -(-width // tp)


class Streams:
    """Memory-bound kernels gathered per class; the streaming law is linear in bytes, so each class is
    timed once for all its kernels."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, bool, bool], list[float]] = defaultdict(lambda: [0.0, 0])

    def add(self, cls: str, nbytes: float, kernels: int = 1, *, row_norm: bool = False,
            unvectorized: bool = False) -> None:
        """``unvectorized``: elementwise kernels PyTorch runs without vector loads (a broadcast operand: RMSNorm's
        two multiplies, rotary's by cos and sin), as ``gpuwise.runtime.kernels.unvectorized`` finds them in a
        trace."""
        g = self._groups[(cls, row_norm, unvectorized)]
        g[0] += nbytes
        g[1] += kernels

    def time(self, gpu, cal: Calibration) -> KernelTime:
        by_class: dict[str, float] = defaultdict(float)
        kernels = 0
        for (cls, row_norm, unvectorized), (nbytes, k) in self._groups.items():
            if k:
                f = streaming_features(cls, nbytes, int(k), gpu, row_norm=row_norm, per_sm_limited=unvectorized)
                by_class[cls] += device_time_s(f, cal)
                kernels += int(k)
        return KernelTime(dict(by_class), kernels)


def rows_of(sh: Shape, lin: LinearSpec) -> float:
    """Tokens one copy of a linear multiplies: routed experts get tokens x top-k / experts (evenly loaded)."""
    if lin.part == "expert":
        return max(1.0, round(sh.tokens * sh.arch.experts_per_token / max(sh.arch.num_experts, 1)))
    return sh.tokens


def dims_of(sh: Shape, lin: LinearSpec) -> tuple[int, int]:
    """(in, out) of one GPU's shard of ``lin``."""
    if lin.role in COLUMN_SPLIT_ROLES:
        return split(lin.in_features, sh.tp), lin.out_features
    return lin.in_features, split(lin.out_features, sh.tp)



# ---- memory-bound kernels, per pass, in bytes over the whole micro-batch -----------------------------

def norm_forward(st: Streams, sh: Shape, width: float, rows: float, count: int, e: int) -> None:
    """``count`` norms over ``width`` features of ``e`` bytes, ``rows`` rows in all."""
    n = width * rows
    if sh.arch.layernorm:
        st.add("norm", 2 * e * n, count, row_norm=True)
        return
    casts = 2 if e != F32 else 0
    st.add("copy", casts * (e + F32) * n, casts * count)
    st.add("elementwise", 2 * F32 * n + 4 * F32 * rows, 3 * count)                 # power, + eps, rsqrt
    st.add("elementwise", (2 * F32 + 2 * e) * n, 2 * count, unvectorized=True)    # x rsqrt, weight x (broadcasts)
    st.add("reduction", F32 * n + F32 * rows, count)


def norm_backward(st: Streams, sh: Shape, width: float, rows: float, count: int, e: int,
                  weight_grad: bool) -> None:
    n = width * rows
    if sh.arch.layernorm:
        st.add("norm", 5 * e * n, 2 * count, row_norm=True)
        return
    casts = 2 if e != F32 else 0
    st.add("copy", casts * (e + F32) * n, casts * count)
    st.add("elementwise", 14 * F32 * n + 6 * F32 * rows, 9 * count)
    st.add("elementwise", (2 * e + 2 * F32) * n, 2 * count, unvectorized=True)    # dy x weight, x rsqrt (broadcasts)
    st.add("reduction", F32 * n, count)
    if weight_grad:
        st.add("elementwise", 3 * e * n, count)
        st.add("reduction", e * n, count)


def reads_hidden(arch: DecoderArch, lin: LinearSpec) -> bool:
    """An attention linear fed by the layer's (normed) input: q, k, v or the fused qkv."""
    return lin.part == "attn" and lin.role != "o" and lin.in_features == arch.hidden_size


def _input_grad_sums(arch: DecoderArch) -> tuple[int, int]:
    """Gradient sums per layer where one input feeds several linears: (attention's q, k, v; gate and up)."""
    attn = sum(1 for lin in arch.linears if reads_hidden(arch, lin))
    mlp = sum(1 for lin in arch.linears if lin.part == "mlp" and lin.role in ("gate", "up", "fc1", "gate_up"))
    return max(attn - 1, 0), max(mlp - 1, 0)


def layers_memory(sh: Shape, backward: bool, trained: bool, first_input_grad: bool = True,
                  recompute: bool = False) -> Streams:
    """Memory-bound kernels of all decoder layers, forward or backward. ``trained``: the norm weights get
    gradients (full fine-tuning). ``first_input_grad`` False: the first layer's input needs no gradient
    (a frozen embedding): its input norm, the gradient sums of q, k, v and the residual's are not run.
    ``recompute``: checkpointing's forward, which stops once the tensors backward needs are back (the last
    residual add is not rerun)."""
    a, e, t = sh.arch, sh.elem, sh.tokens
    layers = a.num_layers
    st = Streams()
    rotary = a.model_type not in NO_ROTARY
    norms = layers * a.norms_per_layer
    norm_rows = norms * t
    mlp = sh.mlp_width_all_layers() * t
    if sh.fused and not backward:
        st.add("norm", 4 * e * sh.h * norm_rows, norms, row_norm=True)   # the residual add within
        if rotary:
            st.add("elementwise", 2 * e * (sh.q + sh.kv) * t * layers, layers)
        st.add("copy", 4 * e * sh.kv * t * layers, layers)
        st.add("elementwise", (3 if a.gated_mlp else 2) * e * mlp, layers)
        return st
    if not backward:
        norm_forward(st, sh, sh.h, norm_rows, norms, sh.stream)
        if a.qk_norm:   # per head, over head_dim
            norm_forward(st, sh, a.head_dim, layers * t * (sh.q + sh.kv) / a.head_dim, 2 * layers, e)
        if rotary:   # q and k by cos and by sin (broadcast over heads), rotate_half's negation, the sums
            st.add("elementwise", 4 * e * (sh.q + sh.kv) * t * layers, 4 * layers, unvectorized=True)
            st.add("elementwise", 4 * e * (sh.q + sh.kv) * t * layers, 4 * layers)
            st.add("copy", 2 * e * (sh.q + sh.kv) * t * layers, 2 * layers)
        if sh.cache:
            st.add("copy", 4 * e * sh.kv * t * layers, 2 * layers)             # KV-cache update
        adds = layers * (1 if recompute else 2)
        st.add("elementwise", (2 * sh.stream + e) * sh.h * t * adds, adds)     # residual adds
        if a.gated_mlp:
            st.add("elementwise", 5 * e * mlp, 2 * layers)                      # activation, x up
        else:
            st.add("elementwise", 2 * e * mlp, layers)
        return st
    skip = 0 if first_input_grad else 1
    norm_backward(st, sh, sh.h, norm_rows - skip * t, norms - skip, sh.stream, trained)
    if a.qk_norm:
        norm_backward(st, sh, a.head_dim, layers * t * (sh.q + sh.kv) / a.head_dim, 2 * layers, e, trained)
    if rotary:      # the gradients by cos and by sin (broadcasts), and the rest
        st.add("elementwise", 4 * e * (sh.q + sh.kv) * t * layers, 4 * layers, unvectorized=True)
        st.add("elementwise", 7 * e * (sh.q + sh.kv) * t * layers, 6 * layers)
        st.add("copy", 3 * e * (sh.q + sh.kv) * t * layers, 4 * layers)
    st.add("copy", 2 * e * (sh.q + 2 * sh.kv) * t * layers, 5 * layers)        # contiguous q/k/v grads, zeros
    attn_sums, mlp_sums = _input_grad_sums(a)
    sums = layers * (2 + attn_sums + mlp_sums) - skip * (1 + attn_sums)        # residual + shared inputs
    st.add("elementwise", 3 * sh.stream * sh.h * t * sums, sums)
    if a.gated_mlp:
        st.add("elementwise", 9 * e * mlp, 3 * layers)
    else:
        st.add("elementwise", 3 * e * mlp, layers)
    if trained:     # bias gradients: the output's gradient summed over tokens
        for lin in a.linears:
            if lin.bias:
                count = lin.copies_per_layer * lin.layers
                st.add("reduction", count * e * dims_of(sh, lin)[1] * rows_of(sh, lin), count)
    return st


def _input_cast(arch: DecoderArch, lin: LinearSpec) -> bool:
    """Under autocast, the linear's input comes from the float32 residual stream (through a norm) and is cast."""
    return reads_hidden(arch, lin) or (lin.part != "attn" and lin.role in ("gate", "up", "fc1", "gate_up"))


def amp_casts(st: Streams, sh: Shape, *, backward: bool, trained: bool, first_input_grad: bool = True,
              recompute: bool = False) -> None:
    """autocast's copies around each block linear: its float32 weight cast to half in every forward, its
    float32 input where it comes from the residual stream; in backward the weight's gradient cast back (where
    it is trained) and the input's gradient."""
    e, a = sh.elem, sh.arch
    # rotary's float32 cos/sin turn q and k to float32: cast to half for attention, and their gradients back
    qkv = (3 * sh.q + 5 * sh.kv, 8) if backward else (sh.q + 3 * sh.kv, 4)
    st.add("copy", (F32 + e) * qkv[0] * sh.tokens * a.num_layers, qkv[1] * a.num_layers)
    for lin in a.linears:
        count, rows = lin.copies_per_layer * lin.layers, rows_of(sh, lin)
        n_in, n_out = dims_of(sh, lin)
        casts_in = _input_cast(a, lin)
        if not backward:
            if recompute and lin.role == "down":
                continue
            if trained:     # frozen base weights are stored in 16 bits (gpuwise.workload.storage.frozen_bytes)
                st.add("copy", count * (F32 + e) * n_in * n_out, count)
            if casts_in:
                st.add("copy", count * (F32 + e) * n_in * rows, count)
            continue
        if trained:
            st.add("copy", count * (F32 + e) * n_in * n_out, count)
        if casts_in:
            with_input = count - (lin.copies_per_layer if not first_input_grad and reads_hidden(a, lin) else 0)
            st.add("copy", with_input * (F32 + e) * n_in * rows, with_input)


def lora_memory(st: Streams, sh: Shape, adapted: list[LinearSpec], dropout: bool, backward: bool,
                recompute: bool = False) -> None:
    """LoRA's scaling multiply and sum with the base output (forward); in backward the scaling's gradient
    and the sum of the input's gradients from base and adapter (none in the first layer's q, k, v: its
    input needs no gradient); dropout's mask (bernoulli, scale, multiply) where it is on."""
    e = sh.elem
    for lin in adapted:
        count = lin.copies_per_layer * lin.layers
        rows = rows_of(sh, lin)
        n_in, n_out = lin.in_features * rows, lin.out_features * rows
        if sh.amp:     # float32 adapters: the input cast up to their dtype and down for the GEMM, both weights cast
            with_input = count - (lin.copies_per_layer if backward and reads_hidden(sh.arch, lin) else 0)
            weights = (F32 + e) * sh.lora_rank * (lin.in_features + lin.out_features)
            st.add("copy", 2 * with_input * (F32 + e) * n_in + count * weights, 2 * with_input + 2 * count)
        if not backward:
            out = 0 if recompute and lin.role == "down" else 1    # checkpointing does not rerun down's output
            st.add("elementwise", count * (5 * e * n_out * out + (7 * e * n_in if dropout else 0.0)),
                   (2 * out + (3 if dropout else 0)) * count)
            continue
        st.add("elementwise", count * 2 * e * n_out, count)
        with_input = count - (lin.copies_per_layer if reads_hidden(sh.arch, lin) else 0)
        st.add("elementwise", with_input * (3 * e * n_in + (3 * e * n_in if dropout else 0.0)),
               (1 + (1 if dropout else 0)) * with_input)


def loss(st: Streams, sh: Shape, logits: str, backward: bool) -> None:
    """transformers' causal-LM loss: float32 logits (an upcast), log-softmax and NLL; 16-bit where the
    workload's ``logits`` is chunked or fused."""
    e, v, t = sh.elem, sh.arch.vocab_size, sh.tokens
    le = F32 if logits == "fp32" else e
    cast = 1 if le != e else 0
    if not backward:
        st.add("copy", cast * (e + le) * v * t, cast + 2)           # upcast; labels shifted (pad, clone)
        st.add("reduction", 3 * le * v * t, 2)                      # log-softmax (2 passes), NLL
    else:
        st.add("reduction", 5 * le * v * t, 2)                      # NLL backward, log-softmax backward
        st.add("copy", cast * (e + le) * v * t, cast + 1)           # downcast; the loss's ones_like


