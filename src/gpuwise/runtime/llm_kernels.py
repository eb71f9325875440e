"""The kernels of a decoder LLM's step, listed from its shapes: what the closed form times instead of a trace.

A micro-batch of ``tokens = batch x seq`` tokens runs, on one GPU (tensor-parallel shards where ``tp`` > 1),
the kernels transformers' eager implementation issues (counted from the traces of its Llama layer, as
``gpuwise.trace`` records them):

* GEMMs: every block linear of ``DecoderArch.linears`` forward (tokens x out over in); in backward its
  dgrad (tokens x in over out), and its wgrad (out x in over tokens) only where the weight is trained.
  Routed experts get tokens x top-k / experts each (evenly loaded). LoRA adds its adapters' GEMMs (two
  forward, four backward); frozen base weights need only dgrad, and with a frozen embedding the first
  layer's q, k, v need none. The LM head alike (over the last token of each prompt in a prefill, as
  ``generate`` and vLLM compute logits); freeze trains the head and the final norm.
* attention: one fused SDPA kernel forward and one backward (``--attention sdpa``/``flash2``) at the FLOPs
  torch counts for it (the full score matrix; backward 2.5 x forward) times the causal share a flash kernel
  computes (``geometry.causal_share``), or eager attention's kernels (the whole matrix).
* memory-bound kernels: ``gpuwise.runtime.llm_streams``.
* gradient checkpointing: the blocks' forward once more, stopping where non-reentrant checkpointing stops
  (the down projection's output and the last residual add are not rerun).

Each is timed by ``gpuwise.runtime.kernels`` as a traced op of that shape is: the tiled GEMM law, the fused
attention law over ``attention_eff``, the streaming laws, the calibration's factors and its
``kernel_latency_s`` per kernel. The closed form and the traced path therefore give one answer where
both apply (tests/closed_form/test_time_paths_agree.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwise.runtime.calibration import Calibration
from gpuwise.runtime.kernels import causal_share, device_time_s, fused_attention_features, gemm_time_s
from gpuwise.runtime.llm_streams import (F32, NO_ROTARY, NONE, SETUP_KERNELS, KernelTime, Shape, Streams, amp_casts,
                                         dims_of, layers_memory, lora_memory, loss, norm_backward, norm_forward,
                                         reads_hidden, rows_of, split)
from gpuwise.runtime.rates import rate_peak_flops_per_s
from gpuwise.workload import Workload
from gpuwise.workload.decoder import DecoderArch, LinearSpec, matches_target
from gpuwise.workload.precision import parse
from gpuwise.workload.storage import compute_bytes

# ---- GEMMs and attention -------------------------------------------------------------------------------

def _gemms(sh: Shape, m: float, n_in: int, n_out: int, *, forward: bool, dgrad: bool, wgrad: bool,
           latency: bool = True) -> float:
    """Time of one linear's GEMMs over ``m`` rows: forward (m x out over in), dgrad, wgrad."""
    shapes = []
    if forward:
        shapes.append((1, m, n_out, n_in))
    if dgrad:
        shapes.append((1, m, n_in, n_out))
    if wgrad:
        shapes.append((1, n_out, n_in, m))
    return gemm_time_s(shapes, sh.gpu, sh.rate, sh.cal, elem_bytes=sh.elem, latency=latency)


def _layers_gemms(sh: Shape, *, forward: bool, dgrad: bool, wgrad: bool, lora: tuple[list[LinearSpec], int] | None,
                  first_input_grad: bool = True, recompute: bool = False, latency: bool = True,
                  expert_share: float | None = None) -> KernelTime:
    """GEMMs of all decoder layers (and routers). ``lora``: (adapted linears, rank); ``first_input_grad``
    False: the first layer's q, k, v (base and adapter A) compute no input gradient. ``recompute``:
    checkpointing's forward, in which the down projections' outputs are not rerun. ``expert_share``: the
    share of routed experts the tokens touch (a decode step's few tokens): only those experts multiply, each
    over its share of the tokens' top-k picks; None: every expert, evenly loaded (``rows_of``)."""
    a = sh.arch
    total, kernels = 0.0, 0

    def add(m: float, n_in: int, n_out: int, count: float, **kind) -> None:
        nonlocal total, kernels
        if count > 0:
            total += count * _gemms(sh, m, n_in, n_out, **kind, latency=latency)
            kernels += int(round(count))

    fwd, dx, dw = (dict(forward=f, dgrad=d, wgrad=g) for f, d, g in
                   ((True, False, False), (False, True, False), (False, False, True)))
    for lin in a.linears:
        count, m = lin.copies_per_layer * lin.layers, rows_of(sh, lin)
        if expert_share is not None and lin.part == "expert" and expert_share > 0:
            count *= expert_share
            m = max(1.0, sh.tokens * a.experts_per_token / (a.num_experts * expert_share))
        n_in, n_out = dims_of(sh, lin)
        with_input = count - (lin.copies_per_layer if not first_input_grad and reads_hidden(a, lin) else 0)
        adapted = bool(lora) and lin in lora[0]
        # checkpointing's forward stops after the last tensor backward needs: a down projection's output is
        # not one (its LoRA adapter's first product is, and it runs after the base GEMM)
        rerun = not (recompute and lin.role == "down")
        add(m, n_in, n_out, count if forward and (rerun or adapted) else 0, **fwd)
        add(m, n_in, n_out, with_input if dgrad else 0, **dx)
        add(m, n_in, n_out, count if wgrad else 0, **dw)
        if adapted:    # x A^T, then (x A^T) B^T; backward: both weights' gradients, B's input's
            rank = lora[1]
            add(m, lin.in_features, rank, count if forward else 0, **fwd)
            add(m, rank, lin.out_features, count if forward and rerun else 0, **fwd)
            add(m, rank, lin.out_features, count if dgrad else 0, **dx)
            add(m, rank, lin.out_features, count if dgrad else 0, **dw)
            add(m, lin.in_features, rank, with_input if dgrad else 0, **dx)
            add(m, lin.in_features, rank, count if dgrad else 0, **dw)
    if a.is_moe:
        add(sh.tokens, sh.h, a.num_experts, a.num_moe_layers if forward else 0, **fwd)
        add(sh.tokens, sh.h, a.num_experts, a.num_moe_layers if dgrad else 0, **dx)
        add(sh.tokens, sh.h, a.num_experts, a.num_moe_layers if wgrad else 0, **dw)
    return KernelTime({"matmul": total}, kernels)


def _attention(sh: Shape, backward: bool) -> KernelTime:
    """All layers' attention over sequences of ``seq`` tokens: one fused SDPA kernel timed as the traced path
    times one (torch's FLOPs: the full score matrix, backward 2.5 x forward, times the causal share a flash
    kernel computes: transformers calls it with is_causal), or eager attention's kernels."""
    a = sh.arch
    heads = split(a.num_heads, sh.tp)
    bh = int(round(sh.tokens / sh.seq * heads))
    dq, dv = sh.q / heads, sh.v_out / heads
    if sh.attention == "eager":
        return _eager_attention(sh, bh, int(round(dq)), int(round(dv)), backward)
    flops = 2.0 * bh * sh.seq * sh.seq * (dq + dv) * (2.5 if backward else 1.0) * causal_share(sh.seq, sh.seq)
    nbytes = sh.elem * sh.tokens * (2 * sh.q + 2 * sh.kv) * (2 if backward else 1)
    f = fused_attention_features(bh, sh.seq, sh.seq, flops, nbytes, sh.gpu, sh.rate)
    return KernelTime({"attention": a.num_layers * device_time_s(f, sh.cal)}, a.num_layers * f.kernels)


def _eager_attention(sh: Shape, bh: int, dq: int, dv: int, backward: bool) -> KernelTime:
    """transformers' eager attention, all layers: K and V repeated to the query heads (GQA), Q Kᵀ, the
    scale, the causal mask (built per layer) filled in, a float32 softmax between casts, then P V; the
    transposes made contiguous. Backward: the four batched GEMMs, the softmax's backward between casts,
    and the sums of the repeated K and V gradients."""
    a, e, t, s = sh.arch, sh.elem, sh.tokens, sh.seq
    layers = a.num_layers
    scores = bh * s * s
    casts = 2 if e != F32 else 0
    gqa = a.num_kv_heads and a.num_kv_heads < a.num_heads and not a.is_mla
    st = Streams()
    if not backward:
        gemms = [(bh, s, s, dq), (bh, s, dv, s)]
        if gqa:
            st.add("copy", 2 * e * t * (sh.kv + sh.q) * layers, 2 * layers)
        st.add("copy", 4 * e * t * sh.q * layers + 3 * s * s * layers, 4 * layers)   # transposes; mask built
        st.add("elementwise", (4 * e * scores + 3 * s * s) * layers, 3 * layers)    # scale, mask fill
        st.add("copy", casts * (e + F32) * scores * layers, casts * layers)
        st.add("reduction", 2 * F32 * scores * layers, layers)                     # softmax: 2 passes
    else:
        gemms = [(bh, s, dv, s), (bh, s, s, dv), (bh, dq, s, s), (bh, s, dq, s)]
        st.add("copy", 2 * e * t * sh.q * layers, layers)
        st.add("copy", casts * (e + F32) * scores * layers, casts * layers)
        st.add("reduction", 3 * F32 * scores * layers, layers)                     # softmax backward: 3 passes
        st.add("elementwise", (4 * e * scores + s * s) * layers, 2 * layers)
        if gqa:
            st.add("reduction", 2 * e * t * (sh.q + sh.kv) * layers, 2 * layers)
    matmul = layers * gemm_time_s(gemms, sh.gpu, sh.rate, sh.cal, elem_bytes=e)
    return KernelTime({"matmul": matmul}, layers * len(gemms)) + st.time(sh.gpu, sh.cal)


# ---- passes ---------------------------------------------------------------------------------------------

def _shape(arch: DecoderArch, w: Workload, gpu, cal: Calibration, tokens: int, seq: int, tp: int = 1) -> Shape:
    # DeepSpeed and FSDP mixed precision (any ZeRO stage, or offload) work on 16-bit weights, as the memory
    # model has it (gpuwise.memory.llm): autocast then casts no weights
    amp = parse(w.precision).amp and w.sharding == "ddp" and w.offload == "none"
    return Shape(arch=arch, tokens=tokens, seq=seq, tp=tp, elem=compute_bytes(w.precision), gpu=gpu,
                 rate=parse(w.precision).rate_key(gpu), cal=cal, training=w.is_training, attention=w.attention,
                 fused=not w.is_training and w.engine == "vllm",
                 cache=not (w.is_training and w.grad_checkpointing), amp=amp, lora_rank=w.lora_rank,
                 amp_blocks=amp and (w.finetune == "full" or not w.is_training),
                 amp_head=amp and (w.finetune in ("full", "freeze") or not w.is_training))


def _adapted(arch: DecoderArch, w: Workload) -> list[LinearSpec]:
    return [lin for lin in arch.linears if matches_target(lin, w.lora_targets)]


def blocks_forward(sh: Shape, lora: tuple[list[LinearSpec], int] | None = None, dropout: bool = False,
                   recompute: bool = False, linear_rate: str | None = None) -> KernelTime:
    """One forward of every decoder layer. ``recompute``: gradient checkpointing's (non-reentrant, as traced)
    forward, which stops early: the MLP's down projection and the last residual add are not rerun.
    ``linear_rate``: the block linears' GEMM rate where the weights' format sets it (``_linear_shape``)."""
    st = layers_memory(sh, backward=False, trained=False, recompute=recompute)
    if lora:
        lora_memory(st, sh, lora[0], dropout, backward=False, recompute=recompute)
    if sh.amp_blocks:
        amp_casts(st, sh, backward=False, trained=True, recompute=recompute)
    return (_layers_gemms(_linear_shape(sh, linear_rate), forward=True, dgrad=False, wgrad=False, lora=lora,
                          recompute=recompute)
            + _attention(sh, backward=False) + st.time(sh.gpu, sh.cal))


@dataclass(frozen=True)
class TrainPasses:
    """One training micro-batch on one GPU: forward, backward, and the recomputed forward of the blocks
    (gradient checkpointing; empty without)."""

    forward: KernelTime
    backward: KernelTime
    recompute: KernelTime

    @property
    def total(self) -> KernelTime:
        return self.forward + self.backward + self.recompute


def train_passes(arch: DecoderArch, w: Workload, gpu, cal: Calibration) -> TrainPasses:
    """The kernels of one micro-batch of ``w`` (``w.batch_size`` sequences) on one GPU."""
    s = w.tokens_per_sequence
    sh = _shape(arch, w, gpu, cal, w.batch_size * s, s)
    full, frozen_blocks = w.finetune == "full", w.finetune == "freeze"
    lora = (_adapted(arch, w), w.lora_rank) if w.finetune in ("lora", "qlora") else None
    dropout = bool(lora) and w.lora_dropout > 0

    fwd = blocks_forward(sh, lora, dropout) + _head(sh, w, backward=False)
    # freeze trains the LM head and the final norm; the embedding is trained only in full fine-tuning
    bwd = _head(sh, w, backward=True, head_grad=full or frozen_blocks, blocks_grad=not frozen_blocks,
                norm_grad=full or frozen_blocks, embedding_grad=full)
    if not frozen_blocks:
        st = layers_memory(sh, backward=True, trained=full, first_input_grad=full)
        if lora:
            lora_memory(st, sh, lora[0], dropout, backward=True)
        if sh.amp_blocks:
            amp_casts(st, sh, backward=True, trained=full, first_input_grad=full)
        bwd = (bwd + _layers_gemms(sh, forward=False, dgrad=True, wgrad=full, lora=lora, first_input_grad=full)
               + _attention(sh, backward=True) + st.time(gpu, cal))
    checkpointed = w.grad_checkpointing and not frozen_blocks
    recompute = blocks_forward(sh, lora, dropout, recompute=True) if checkpointed else NONE
    return TrainPasses(fwd, bwd, recompute)


def _head(sh: Shape, w: Workload, *, backward: bool, head_grad: bool = False, blocks_grad: bool = False,
          norm_grad: bool = False, embedding_grad: bool = False, head_rows: int | None = None) -> KernelTime:
    """Embedding, final norm, LM head and loss (training); ``head_rows``: tokens that get logits (all).
    Backward: ``head_grad`` the head's weight gradient, ``blocks_grad`` the gradient into the blocks,
    ``norm_grad`` the final norm's weight gradient, ``embedding_grad`` the embedding's."""
    a, t = sh.arch, sh.tokens
    rows = t if head_rows is None else head_rows
    vocab = split(a.vocab_size, sh.tp)
    st = Streams()
    if not backward:
        st.add("embedding", 2 * t * sh.h * sh.stream + 8 * t)    # a gather: the tokens' rows (kernels.indexing_bytes)
        st.add("copy", 0.0, SETUP_KERNELS[a.model_type not in NO_ROTARY])
        norm_forward(st, sh, sh.h, t, 1, sh.stream)
        if sh.training:
            loss(st, sh, w.logits, backward=False)
        if sh.amp_head:     # the head's weight and input cast to half
            st.add("copy", (F32 + sh.elem) * (vocab * sh.h + rows * sh.h), 2)
        gemm = _gemms(sh, rows, sh.h, vocab, forward=True, dgrad=False, wgrad=False)
        return KernelTime({"matmul": gemm}, 1) + st.time(sh.gpu, sh.cal)
    loss(st, sh, w.logits, backward=True)
    if blocks_grad:
        norm_backward(st, sh, sh.h, t, 1, sh.stream, norm_grad)
    elif norm_grad:     # the weight's gradient alone: dy x normed input, summed over tokens
        st.add("elementwise", 3 * sh.stream * sh.h * t)
        st.add("reduction", sh.stream * sh.h * t)
    if embedding_grad:
        st.add("embedding", (a.vocab_size * sh.h + t * sh.h) * sh.stream + 8 * t, 3)
        if a.tie_word_embeddings and head_grad:     # the head's gradient added to the tied embedding's
            st.add("elementwise", 3 * sh.stream * a.vocab_size * sh.h)
    dgrad = blocks_grad or norm_grad
    if sh.amp_head:     # gradients cast back to float32: the head's weight's, its input's
        st.add("copy", (F32 + sh.elem) * (vocab * sh.h * head_grad + rows * sh.h * dgrad), int(head_grad) + int(dgrad))
    gemm = _gemms(sh, rows, sh.h, vocab, forward=False, dgrad=dgrad, wgrad=head_grad)
    return KernelTime({"matmul": gemm}, int(dgrad) + int(head_grad)) + st.time(sh.gpu, sh.cal)


def _linear_shape(sh: Shape, linear_rate: str | None) -> Shape:
    """The shape the block linears' GEMMs see where their quantization sets their rate (FP8 W8A8: the fp8 peak,
    1-byte operands); ``sh`` itself otherwise."""
    return sh if linear_rate is None else replace(sh, rate=linear_rate, elem=1)


def prefill(arch: DecoderArch, w: Workload, gpu, cal: Calibration, *, prompt_tokens: int, batch: int,
            tp: int = 1, linear_rate: str | None = None) -> KernelTime:
    """One forward over ``batch`` prompts of ``prompt_tokens`` on one of ``tp`` tensor-parallel GPUs; logits
    for the last token of each prompt. ``linear_rate``: the block linears' GEMM rate where the weights' format
    sets it (``runtime.llm.linear_gemm_rate``); attention and the LM head keep the compute precision's."""
    sh = _shape(arch, w, gpu, cal, prompt_tokens * batch, prompt_tokens, tp)
    return blocks_forward(sh, linear_rate=linear_rate) + _head(sh, w, backward=False, head_rows=batch)


def decode_compute_s(arch: DecoderArch, w: Workload, gpu, cal: Calibration, *, context_tokens: float, batch: int,
                     tp: int = 1, linear_rate: str | None = None) -> float:
    """The arithmetic of one decode step (one token for each of ``batch`` sequences): the GEMMs at the tiled
    law (no streaming floor, no latency: the weights' and the cache's reads are the caller's memory term), of
    MoE the experts the batch touches only, attention's FLOPs at the peak (it reads the cache)."""
    sh = _shape(arch, w, gpu, cal, batch, 1, tp)
    share = arch.expert_share(batch) if arch.is_moe else None
    gemms = _layers_gemms(_linear_shape(sh, linear_rate), forward=True, dgrad=False, wgrad=False, lora=None,
                          latency=False, expert_share=share).total_s
    head = _gemms(sh, batch, sh.h, split(arch.vocab_size, tp), forward=True, dgrad=False, wgrad=False, latency=False)
    attention = arch.attention_flops_per_token(context_tokens) * batch / tp / rate_peak_flops_per_s(gpu, sh.rate)
    return gemms + head + attention
