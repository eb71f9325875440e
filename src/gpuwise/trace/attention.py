"""Scaled dot-product attention as CUDA runs it: one fused kernel, not CPU's choice.

On CPU, ``F.scaled_dot_product_attention`` with dropout (training) or half precision falls back to
the math path, which materialises batch x heads x seq x seq score matrices; on a CUDA GPU PyTorch
picks a fused kernel that never does. While tracing, this torch-function mode routes every SDPA
call to CUDA's fused ops (their meta kernels run on fake CPU tensors and autograd knows their
backward): FlashAttention for fp16/bf16 without a mask and head_dim <= 256, else the
memory-efficient kernel (fp32, masks). GPU-specific exceptions (FlashAttention needs sm80+) are
left to the memory and runtime models, which see the op name.

It replaces ``torch.nn.functional.scaled_dot_product_attention`` for the duration of a trace (a
torch-function mode would be simpler, but it is not active when gradient checkpointing recomputes
a block during backward, and the recomputation must take the same path as the forward).
"""

from __future__ import annotations

import torch
import contextlib
from typing import Iterator

from gpuwise.trace.recorder import Recorder

_HALF = (torch.float16, torch.bfloat16)
aten = torch.ops.aten


@contextlib.contextmanager
def cuda_attention(recorder: Recorder) -> Iterator[None]:
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention
    functional.scaled_dot_product_attention = CudaAttention(recorder)
    try:
        yield
    finally:
        functional.scaled_dot_product_attention = original


class CudaAttention:
    """Callable with ``F.scaled_dot_product_attention``'s signature, running CUDA's fused kernels."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
        if torch.is_autocast_enabled("cpu"):   # SDPA is on CUDA autocast's half-precision list
            dtype = torch.get_autocast_dtype("cpu")
            query, key, value = (t.to(dtype) if t.dtype == torch.float32 else t for t in (query, key, value))
        head_dim = query.shape[-1]
        if query.dtype in _HALF and attn_mask is None and head_dim <= 256:
            out = aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                           scale=scale)
        else:
            if key.shape[-3] != query.shape[-3]:   # grouped-query attention: this kernel needs full heads
                repeat = query.shape[-3] // key.shape[-3]
                key, value = key.repeat_interleave(repeat, -3), value.repeat_interleave(repeat, -3)
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
