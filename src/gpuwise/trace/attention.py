"""Scaled dot-product attention as the workload's stack runs it on CUDA (``Workload.attention``).

- ``sdpa`` (transformers' default): on CPU, ``F.scaled_dot_product_attention`` with dropout
  (training) or half precision falls back to the math path, which materialises batch x heads x
  seq x seq score matrices; on a CUDA GPU PyTorch picks a fused kernel that never does. Every SDPA
  call is routed to CUDA's fused ops (their meta kernels run on fake CPU tensors and autograd
  knows their backward): FlashAttention for fp16/bf16 without a mask and head_dim <= 256, else
  the memory-efficient kernel (fp32, masks). Both keep the output and a logsumexp for backward.
- ``flash2`` (flash-attn 2 through transformers): the flash kernel whenever the dtype is 16-bit;
  padding masks become unpadded variable-length batches, so no mask is materialised.
- ``eager``: a transformers model is built with ``attn_implementation="eager"`` and runs its own eager
  code (workload/spec_builders.py); other code's SDPA calls get transformers' ``eager_attention_forward``:
  ``matmul(q, kᵀ)·scale (+ mask) -> softmax in float32 -> cast -> dropout -> matmul(·, v)``, as real
  ops, so autograd keeps what it keeps on a GPU: the float32 softmax output, the dropout mask and
  the dropped (or cast) probabilities, each batch x heads x seq².

GPU-specific exceptions (FlashAttention needs sm80+) are left to the memory and runtime models,
which see the op names. ``F.scaled_dot_product_attention`` is replaced for the duration of a trace
(a torch-function mode would be simpler, but it is not active when gradient checkpointing
recomputes a block during backward, and the recomputation must take the same path as the forward).
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch

from gpuwise.trace.recorder import Recorder

_HALF = (torch.float16, torch.bfloat16)
aten = torch.ops.aten


@contextlib.contextmanager
def cuda_attention(recorder: Recorder, implementation: str = "sdpa") -> Iterator["CudaAttention | EagerAttention"]:
    """Installs the stand-in for ``implementation`` ("sdpa", "flash2", "eager") and yields it
    (``calls`` counts the attention calls it served)."""
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention
    if implementation == "eager":
        attention = EagerAttention()
    else:
        attention = CudaAttention(recorder, flash2=implementation == "flash2")
    functional.scaled_dot_product_attention = attention
    try:
        yield attention
    finally:
        functional.scaled_dot_product_attention = original


def _autocast(query, key, value):
    if torch.is_autocast_enabled("cpu"):   # SDPA and matmul are on CUDA autocast's half-precision list
        dtype = torch.get_autocast_dtype("cpu")
        return tuple(t.to(dtype) if t.dtype == torch.float32 else t for t in (query, key, value))
    return query, key, value


def _repeat_kv(query, key, value):
    if key.shape[-3] != query.shape[-3]:   # grouped-query attention: expanded to full heads (a copy)
        repeat = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(repeat, -3), value.repeat_interleave(repeat, -3)
    return key, value


class CudaAttention:
    """Callable with ``F.scaled_dot_product_attention``'s signature, running CUDA's fused kernels."""

    def __init__(self, recorder: Recorder, flash2: bool = False) -> None:
        self.recorder = recorder
        self.flash2 = flash2
        self.calls = 0
        self.math_calls = 0   # those whose inputs are not all 3-D or all 4-D: SDPA's math path

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False):
        self.calls += 1
        query, key, value = _autocast(query, key, value)
        ranks = {t.dim() for t in (query, key, value)}
        if ranks == {3}:
            # SDPA reads (batch, seq, dim) as one head of each sequence: unsqueezed to 4-D, then fused as any
            four_d = (t.unsqueeze(0) for t in (query, key, value))
            return self._fused(*four_d, attn_mask, dropout_p, is_causal, scale).squeeze(0)
        if ranks != {4}:   # mixed ranks or other shapes
            self.math_calls += 1
            # other shapes run SDPA's math path: half inputs upcast to float32, the float32 scores kept for
            # backward, the output cast back
            with torch.autocast("cpu", enabled=False):
                out = _math_attention(query.float(), key.float(), value.float(), attn_mask, dropout_p, is_causal,
                                      scale, softmax_dtype=torch.float32)
            return out.to(query.dtype)
        return self._fused(query, key, value, attn_mask, dropout_p, is_causal, scale)

    def _fused(self, query, key, value, attn_mask, dropout_p, is_causal, scale):
        """CUDA's fused kernels on (batch, heads, seq, dim) inputs: flash for half inputs without a mask and a
        head_dim up to 256, else memory-efficient attention."""
        if self.flash2:
            attn_mask = None   # flash-attn 2 unpads padded batches: no mask tensor on the GPU
        head_dim = query.shape[-1]
        if query.dtype in _HALF and attn_mask is None and head_dim <= 256:
            out = aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                           scale=scale)
        else:
            key, value = _repeat_kv(query, key, value)
            bias = None
            if attn_mask is not None:
                bias = attn_mask
                if bias.dtype == torch.bool:   # CUDA converts boolean masks to an additive bias
                    bias = torch.zeros(bias.shape, dtype=query.dtype).masked_fill_(~bias, float("-inf"))
                elif bias.dtype != query.dtype:
                    bias = bias.to(query.dtype)
                bias = bias.expand(*query.shape[:-1], key.shape[-2])
            out = aten._scaled_dot_product_efficient_attention(query, key, value, bias, query.requires_grad,
                                                               dropout_p, is_causal, scale=scale)
        for extra in out[2:]:
            # Dropout RNG seed/offset: host tensors on CUDA, not allocations on the GPU.
            if isinstance(extra, torch.Tensor) and extra.dim() <= 1 and extra.numel() <= 2:
                block = self.recorder.block_of(extra)
                if block is not None:
                    self.recorder.host_blocks.add(block)
        return out[0]


class EagerAttention:
    """transformers' ``eager_attention_forward`` behind SDPA's signature: the score matrices are real
    tensors, so the trace keeps what eager attention keeps for backward."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False):
        self.calls += 1
        query, key, value = _autocast(query, key, value)
        key, value = _repeat_kv(query, key, value)
        return _math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, softmax_dtype=torch.float32)


def _math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, *, softmax_dtype: torch.dtype):
    """``softmax(q kᵀ · scale + mask) v`` as real ops (the batch x ... x seq² scores kept for backward), the
    softmax in ``softmax_dtype`` and cast back to the query's dtype."""
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        q_len, k_len = query.shape[-2], key.shape[-2]
        causal = torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probs = torch.nn.functional.softmax(scores, dim=-1, dtype=softmax_dtype).to(query.dtype)
    if dropout_p > 0.0:
        probs = torch.nn.functional.dropout(probs, p=dropout_p, training=True)
    return torch.matmul(probs, value)
