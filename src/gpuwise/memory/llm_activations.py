"""Activation memory of a decoder LLM step, counted tensor by tensor from what autograd saves.

Assumptions (HF transformers implementation, PyTorch 2.x autograd; docs/llm.md lists them):

- Attention (``Workload.attention``): sdpa/flash2 are fused kernels that save q, k, v (after RoPE,
  before any GQA expansion), the output and a float32 logsumexp per head, never the s×s scores;
  eager keeps the float32 softmax and the cast probabilities (``attention_bytes_per_token``).
- LoRA dropout (``Workload.lora_dropout`` > 0): each adapted linear keeps a dropout mask (counted at
  the input's dtype: ``memory.cuda.dropout_mask_bytes``) and the dropped copy of its input; without it
  the adapter keeps the input itself.
- RMSNorm upcasts to float32 and saves that float32 input (4 B/elem) and, only when its weight is
  trained, its 16-bit output. LayerNorm saves its input plus mean and rstd.
- A linear layer saves its input only when its weight is trained or it carries a LoRA adapter
  (autograd saves ``x`` for ``dW = gᵀx`` only if W requires grad); an input already saved by
  another op is not counted twice.
- SiLU/GELU save their input; the gated product saves both operands; ``o_proj`` gets a fresh
  contiguous copy of the attention output (transpose + reshape).
- MoE (HF's loop over experts): each (token, expert) pair copies the hidden state, runs a gated
  MLP of ``moe_intermediate_size`` and saves the expert output for the routing-weight product.
- Loss (``Workload.logits``): fp32 (transformers) saves the float32 log-softmax and briefly holds
  two more float32 V-sized tensors per token in backward; chunked (LitGPT) and fused (Liger) see
  ``logits_bytes_per_token``.
- Gradient checkpointing (HF: every decoder layer): saves each layer's 16-bit input; backward
  recomputes one layer at a time, so one layer's full activations come back.
- Dropout is 0 (as in current LLM configs); nothing of the input pipeline is on the GPU beyond ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpuwise.memory import cuda as cuda_rules
from gpuwise.workload.decoder import DecoderArch, LinearSpec


@dataclass(frozen=True)
class Trainability:
    """Which parts of the model keep tensors for backward."""

    blocks_need_grad: bool                 # False when nothing inside the blocks is trained (freeze)
    norms_trained: bool                    # full fine-tuning trains norm weights
    saves_input: Callable[[LinearSpec], bool]   # the layer itself (trained or quantized) or its adapter keeps x
    lm_head_trained: bool
    adapted: Callable[[LinearSpec], bool] = lambda lin: False   # carries a LoRA adapter
    lora_dropout: bool = False             # adapters see dropout(x): a bool mask and the dropped copy are kept


@dataclass(frozen=True)
class LossStack:
    """What the step's software stack decides about activations beyond the model's shapes."""

    seq_len: int = 128                     # tokens per sequence (attention scores are seq² per head)
    attention: str = "sdpa"                # sdpa | flash2 | eager (Workload.attention)
    logits: str = "fp32"                   # fp32 | chunked | fused (Workload.logits)


def _saved(arch: DecoderArch, tr: Trainability, part: str, roles: tuple[str, ...]) -> bool:
    return any(tr.saves_input(l) for l in arch.linears if l.part == part and l.role in roles)


def layer_bytes_per_token(arch: DecoderArch, tr: Trainability, compute_bytes: int, moe_layer: bool,
                          expert_pairs_per_token: float | None = None) -> float:
    """Bytes one token leaves saved for backward in one decoder layer (no checkpointing).

    ``expert_pairs_per_token``: (token, expert) pairs per token in MoE layers; top-k for real
    routing (default), num_experts × top-k to mirror the tracer's worst case for data-dependent
    routing on fake tensors."""
    if not tr.blocks_need_grad:
        return 0.0
    b, h = compute_bytes, arch.hidden_size
    norm_saved = (b * h + 8) if arch.layernorm else (4 * h + 4)
    norm_out = 0 if arch.layernorm else (b * h if tr.norms_trained else 0)
    total = 0.0
    # attention half
    total += norm_saved + norm_out
    attn_in_saved = _saved(arch, tr, "attn", ("q", "k", "v", "qkv"))
    # the norm's output feeds the projections; saved once more unless the norm itself kept it
    own_out = arch.layernorm or not tr.norms_trained
    if attn_in_saved and own_out:
        total += b * h
    if arch.is_mla:
        lat = arch.q_lora_rank + arch.kv_lora_rank
        total += 4 * lat + (b * lat if attn_in_saved else 0)       # latent norms + b-proj inputs
    if arch.qk_norm:
        total += 4 * (arch.q_dim + arch.kv_dim)
    out_width = arch.num_heads * (arch.v_head_dim if arch.is_mla else arch.head_dim)
    total += b * (arch.q_dim + arch.kv_dim + arch.v_dim) + b * out_width + 4 * arch.num_heads
    if _saved(arch, tr, "attn", ("o",)):
        total += b * out_width
    total += _lora_dropout_bytes(arch, tr, b, ("attn",))
    # extra norms (Gemma 2/3: post-attention, pre- and post-feed-forward)
    extra_norms = arch.norms_per_layer - 2
    if extra_norms > 0:
        total += extra_norms * (4 * h + 4 + (b * h if tr.norms_trained else 0))
    # feed-forward half (phi's parallel block shares the attention norm)
    if arch.norms_per_layer >= 2:
        total += norm_saved + norm_out
    if moe_layer:
        k, mi = expert_pairs_per_token or arch.experts_per_token, arch.moe_intermediate_size
        total += 4 * arch.num_experts + 16 * arch.experts_per_token   # float32 router softmax, top-k
        expert_in = b * h if _saved(arch, tr, "expert", ("gate", "up", "fc1", "gate_up")) else 0
        total += k * (expert_in + _mlp_bytes(arch, tr, "expert", b, mi) + b * h)
        if arch.shared_intermediate_size:
            total += _mlp_bytes(arch, tr, "shared", b, arch.shared_intermediate_size)
            total += b * h + (4 if arch.shared_expert_gate else 0)
        if (expert_in or _saved(arch, tr, "shared", ("gate", "up"))) and own_out:
            total += b * h
        total += _lora_dropout_bytes(arch, tr, b, ("shared",)) + k * _lora_dropout_bytes(arch, tr, b, ("expert",))
    else:
        total += _mlp_bytes(arch, tr, "mlp", b, arch.intermediate_size)
        total += _lora_dropout_bytes(arch, tr, b, ("mlp",))
        mlp_in_saved = _saved(arch, tr, "mlp", ("gate", "up", "fc1", "gate_up"))
        if mlp_in_saved and own_out and arch.norms_per_layer >= 2:
            total += b * h
    return total


def _lora_dropout_bytes(arch: DecoderArch, tr: Trainability, b: int, parts: tuple[str, ...]) -> float:
    """PEFT gives each adapted linear its own dropout: it keeps a mask (``dropout_mask_bytes``) and the
    dropped copy of the input (which the adapter's A keeps), per input element. Without dropout A keeps
    x itself, counted with the layer's inputs."""
    if not tr.lora_dropout:
        return 0.0
    return sum((cuda_rules.dropout_mask_bytes(b) + b) * lin.in_features for lin in arch.linears
               if lin.part in parts and tr.adapted(lin))


def attention_bytes_per_token(arch: DecoderArch, compute_bytes: int, seq_len: int, attention: str) -> float:
    """What eager attention keeps beyond a fused kernel, per token of one layer (0 for sdpa/flash2).

    transformers' ``eager_attention_forward``: ``softmax(q·kᵀ, dtype=float32).to(dtype)`` keeps the
    float32 softmax output (softmax's backward) and, in 16-bit, the cast probabilities (the second
    matmul's backward): heads × seq × (4 + 2) bytes a token (4 in float32, where the cast is the same
    tensor); grouped-query k and v are expanded to every head (``repeat_kv``) and the expanded copies
    are kept; no logsumexp. Attention dropout is 0 in LLM configs."""
    if attention != "eager":
        return 0.0
    b = compute_bytes
    probs = 4 + (b if b != 4 else 0)
    expanded = b * 2 * max(arch.q_dim - arch.kv_dim, 0)
    return arch.num_heads * seq_len * probs + expanded - 4 * arch.num_heads


def _mlp_bytes(arch: DecoderArch, tr: Trainability, part: str, b: int, width: int) -> float:
    down_saved = _saved(arch, tr, part, ("down",))
    if arch.gated_mlp:
        # activation input, activation output and the up projection (operands of the product)
        return 3 * b * width + (b * width if down_saved else 0)
    return b * width + (b * width if down_saved else 0)      # GELU input, fc2 input


def logits_bytes_per_token(arch: DecoderArch, compute_bytes: int, logits: str = "fp32") -> tuple[float, float]:
    """(saved, transient-at-loss-backward) bytes per token for the LM head and loss.

    - ``fp32`` (transformers): the loss upcasts the logits to float32 and log-softmax saves its
      float32 output; the 16-bit logits die with the model output (the Trainer keeps only the loss).
      Backward of the loss holds the NLL gradient and the log-softmax gradient (float32) at once.
    - ``chunked`` (LitGPT's ``chunked_cross_entropy``, LM head run in 128-token chunks): the 16-bit
      logit chunks stay referenced by the training loop through backward and each chunk's 16-bit
      log-softmax is saved; backward handles one chunk at a time (no per-token transient).
    - ``fused`` (Liger's fused linear cross-entropy): no logits are kept; the gradient of the hidden
      state is computed in forward and kept (16-bit, hidden-size a token)."""
    v, b = arch.vocab_size, compute_bytes
    if logits == "chunked":
        return float(2 * b * v), 0.0
    if logits == "fused":
        return float(b * arch.hidden_size), 0.0
    return float(4 * v), float(8 * v)


@dataclass(frozen=True)
class TrainActivations:
    saved_bytes: float          # held at the end of forward (all layers + loss)
    transient_bytes: float      # extra at the peak inside backward (loss gradient or one recomputed layer)
    per_layer_bytes: float      # one layer, no checkpointing, whole micro-batch

    @property
    def peak_bytes(self) -> float:
        return self.saved_bytes + self.transient_bytes


def train_activations(arch: DecoderArch, tr: Trainability, tokens: int, compute_bytes: int,
                      checkpointing: bool, expert_pairs_per_token: float | None = None,
                      stack: LossStack = LossStack()) -> TrainActivations:
    """Activations of one micro-batch of ``tokens`` tokens (batch × sequence length)."""
    dense_layers = arch.num_layers - arch.num_moe_layers
    eager = attention_bytes_per_token(arch, compute_bytes, stack.seq_len, stack.attention) if tr.blocks_need_grad else 0.0
    dense = layer_bytes_per_token(arch, tr, compute_bytes, moe_layer=False) + eager
    moe = (layer_bytes_per_token(arch, tr, compute_bytes, True, expert_pairs_per_token) + eager
           if arch.num_moe_layers else 0.0)
    largest = max(dense if dense_layers else 0.0, moe)
    logits_saved, logits_transient = logits_bytes_per_token(arch, compute_bytes, stack.logits)
    h = arch.hidden_size
    # final norm: float32 input when the stream needs a gradient; its output when the norm or the
    # LM head is trained (the LM head's input is that same tensor)
    head = (4 * h + 4 if tr.blocks_need_grad else 0) + (compute_bytes * h if tr.lm_head_trained or tr.norms_trained else 0)
    ids = 24                                                               # input ids, labels, positions
    if checkpointing and tr.blocks_need_grad:
        layers = arch.num_layers * compute_bytes * h
        transient = max(logits_transient, largest)
    else:
        layers = dense_layers * dense + arch.num_moe_layers * moe
        transient = logits_transient
        if tr.blocks_need_grad and not tr.norms_trained and not arch.layernorm:
            # the embedding output needs no gradient when the embedding is frozen: the first
            # layer's input norm saves nothing
            layers -= 4 * h + 4
    saved = (layers + logits_saved + head + ids) * tokens
    return TrainActivations(saved_bytes=saved, transient_bytes=transient * tokens, per_layer_bytes=largest * tokens)


def prefill_bytes(arch: DecoderArch, tokens: int, batch: int, compute_bytes: int) -> float:
    """Peak live activations of a no-grad prefill of ``tokens`` tokens in all (batch × prompt): the
    residual stream, the normed copy and the widest intermediate of one layer; logits of the last
    position only (HF generate and vLLM compute the LM head for the last token of each prompt)."""
    b, h = compute_bytes, arch.hidden_size
    if arch.is_moe:
        width = max(arch.moe_intermediate_size * arch.experts_per_token, arch.shared_intermediate_size,
                    arch.intermediate_size if arch.num_layers > arch.num_moe_layers else 0)
    else:
        width = arch.intermediate_size
    mlp_live = b * (2 * h + (3 if arch.gated_mlp else 2) * width)
    attn_live = b * (2 * h + arch.q_dim + arch.kv_dim + arch.v_dim + arch.q_dim) + 4 * arch.num_heads
    return tokens * max(mlp_live, attn_live) + batch * arch.vocab_size * (b + 4)


def decode_logits_bytes(arch: DecoderArch, batch: int) -> float:
    """Live activations of one decode step of ``batch`` sequences: the last position's logits and their float32
    copy (6 B a vocabulary entry); a layer's few rows are negligible beside them."""
    return batch * arch.vocab_size * 6.0
