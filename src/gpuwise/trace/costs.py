"""Per-operator cost rules: FLOPs, attributes and kernel launches, keyed by aten op.

FLOPs come from torch's own formulas (``torch.utils.flop_counter.flop_registry``); this module
adds the CPU-only ops torch has no formula for (the tracer runs on CPU, so SDPA shows up as its CPU
kernel) and the CUDA launch count of foreach ops. Adding an operator is adding one entry.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

from gpuwise.trace.rnn import rnn_attrs
from gpuwise.trace.rnn_shape import shape_of

aten = torch.ops.aten

FlopRule = Callable[..., int]
_EXTRA_FLOPS: dict[Any, FlopRule] = {}


def _flops_rule(*packets):
    def register(fn: FlopRule) -> FlopRule:
        for packet in packets:
            _EXTRA_FLOPS[packet] = fn
        return fn
    return register


@_flops_rule(aten._scaled_dot_product_flash_attention_for_cpu)
def _sdpa_cpu_flops(query, key, value, *args, **kwargs) -> int:
    return sdpa_flop_count(query.shape, key.shape, value.shape)


@_flops_rule(aten._scaled_dot_product_flash_attention_for_cpu_backward)
def _sdpa_cpu_backward_flops(grad_out, query, key, value, *args, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape)


@_flops_rule(aten._scaled_dot_product_attention_math)
def _sdpa_math_flops(query, key, value, *args, **kwargs) -> int:
    return sdpa_flop_count(query.shape, key.shape, value.shape)


_RNN_PACKETS = {torch.ops.gpuwise.cudnn_rnn, torch.ops.gpuwise.cudnn_rnn_backward}


@_flops_rule(torch.ops.gpuwise.cudnn_rnn)
def _rnn_flops(*args, **kwargs) -> int:
    return shape_of(rnn_attrs(args)).forward_flops()


@_flops_rule(torch.ops.gpuwise.cudnn_rnn_backward)
def _rnn_backward_flops(*args, **kwargs) -> int:
    # the data gradient (through the input and the recurrence) and the weight gradient (unless the weights are
    # frozen): each a forward's GEMMs
    attrs = rnn_attrs(args)
    return (2 if attrs.get("weight_grad", True) else 1) * shape_of(attrs).forward_flops()


def op_flops(packet, args: tuple, kwargs: dict, out) -> int:
    rule = flop_registry.get(packet)
    if rule is not None:
        try:
            return int(rule(*args, **kwargs, out_val=out))
        except Exception:  # a formula that does not cover this overload's signature: no FLOPs known
            return 0
    rule = _EXTRA_FLOPS.get(packet)
    return int(rule(*args, **kwargs)) if rule is not None else 0


# --- attributes ----------------------------------------------------------------------------------

_CONV_PACKETS = {aten.convolution, aten._convolution, aten.convolution_backward, aten.cudnn_convolution}
_SDPA_PACKETS = {aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_attention_math,
                 aten._scaled_dot_product_flash_attention_for_cpu_backward,
                 aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
                 aten._scaled_dot_product_flash_attention_backward,
                 aten._scaled_dot_product_efficient_attention_backward}
_SDPA_ARGS = {  # positional index of (dropout_p, is_causal) per op (torch 2.14's schemas)
    aten._scaled_dot_product_flash_attention_for_cpu: (3, 4),
    aten._scaled_dot_product_flash_attention: (3, 4),
    aten._scaled_dot_product_efficient_attention: (5, 6),
    # backward: a causal kernel skips the masked blocks in backward too
    aten._scaled_dot_product_flash_attention_for_cpu_backward: (6, 7),
    aten._scaled_dot_product_flash_attention_backward: (10, 11),
    aten._scaled_dot_product_efficient_attention_backward: (9, 11),
}
_SDPA_BACKWARD = {aten._scaled_dot_product_flash_attention_for_cpu_backward, aten._scaled_dot_product_flash_attention_backward,
                  aten._scaled_dot_product_efficient_attention_backward}
_EMPTY: dict = {}


# index_put(self, indices, values, accumulate=False): accumulating sums into the addressed elements (a sort first)
_INDEX_PUT_PACKETS = {aten.index_put, aten.index_put_, aten._index_put_impl_}


def op_attrs(packet, args: tuple, kwargs: dict) -> dict:
    """What the runtime model needs beyond shapes: conv geometry, attention flags, memory layout, whether an
    index_put accumulates, a fused RNN's structure."""
    if packet in _RNN_PACKETS:
        return rnn_attrs(args)
    if packet in _INDEX_PUT_PACKETS:
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        return {"accumulate": bool(accumulate)} if accumulate else _EMPTY
    if packet in _CONV_PACKETS:
        # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
        # convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed, ...)
        offset = 1 if packet is aten.convolution_backward else 0
        x = args[offset]
        return {"stride": tuple(args[3 + offset]), "padding": tuple(args[4 + offset]),
                "dilation": tuple(args[5 + offset]), "transposed": bool(args[6 + offset]),
                "groups": int(args[8 + offset]),
                "channels_last": x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last)
                and not x.is_contiguous()}
    if packet in _SDPA_PACKETS:
        attrs: dict = {"attention": True}
        positions = _SDPA_ARGS.get(packet)
        if positions is not None:
            dropout_at, causal_at = positions
            attrs["dropout_p"] = float(args[dropout_at]) if len(args) > dropout_at else 0.0
            causal = args[causal_at] if len(args) > causal_at else kwargs.get("is_causal", False)
            attrs["is_causal"] = bool(causal)
            if packet not in _SDPA_BACKWARD:
                attrs["has_mask"] = kwargs.get("attn_mask") is not None or (
                    packet is aten._scaled_dot_product_efficient_attention and args[3] is not None)
        return attrs
    return _EMPTY


# --- kernel launches -----------------------------------------------------------------------------

# CUDA's multi_tensor_apply: at most this many tensors per launch, by number of tensor lists
# (ATen/native/cuda/MultiTensorApply.cuh), and at most 320 blocks of 65536 elements per launch.
_MAX_TENSORS_BY_DEPTH = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}
_MAX_BLOCKS = 320
_CHUNK_ELEMENTS = 65536


def foreach_kernel_count(tensor_lists: list[list[torch.Tensor]]) -> int:
    """Launches of one CUDA foreach op over ``tensor_lists`` (all lists have the same length)."""
    if not tensor_lists or not tensor_lists[0]:
        return 0
    max_tensors = _MAX_TENSORS_BY_DEPTH.get(len(tensor_lists), 30)
    launches = tensors = blocks = 0
    for t in tensor_lists[0]:
        chunks = -(-t.numel() // _CHUNK_ELEMENTS)
        tensors += 1
        while chunks:
            take = min(chunks, _MAX_BLOCKS - blocks)
            blocks += take
            chunks -= take
            if blocks == _MAX_BLOCKS or tensors == max_tensors:
                launches += 1
                blocks = 0
                tensors = 1 if chunks else 0
    return launches + (1 if blocks or tensors else 0)
