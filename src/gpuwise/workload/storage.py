"""Bytes per parameter: how weights, gradients and optimizer state are stored for each setting."""

from __future__ import annotations

from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.precision import parse

NF4_BLOCK = 64                 # bitsandbytes 4-bit: one absmax per 64 weights
NF4_DQ_BLOCK = 256             # double quantization: one float32 absmax per 256 first-level absmaxes
INT8_OPTIMIZER_BLOCK = 2048    # bitsandbytes 8-bit optimizers: block-wise quantized state


def compute_bytes(precision) -> int:
    """Bytes per element of activations (``Precision.activation_bytes``): float32 for fp32/tf32, 16-bit otherwise."""
    return parse(precision).activation_bytes


def trainable_bytes(precision) -> int:
    """Storage of trained parameters and their gradients (``Precision.master_bytes``): float32 master
    weights under fp32, tf32 and AMP; 16-bit under pure fp16/bf16 (LitGPT's ``bf16-true``)."""
    return parse(precision).master_bytes


def frozen_bytes(precision) -> int:
    """Storage of frozen, unquantized weights: fine-tuning recipes load the base model in 16-bit
    (``torch_dtype=bfloat16``) whenever the step computes in 16-bit."""
    return parse(precision).activation_bytes


def quant_bytes_per_param(quant: str, *, double_quant: bool = True, out_features: int = 0, in_features: int = 0) -> float:
    """Bytes per weight of a quantized linear layer.

    nf4 (bitsandbytes Linear4bit): 4 bits + a float32 absmax per 64 weights (0.5625 B); with double
    quantization the absmaxes are 8-bit, plus one float32 per 256 of them (0.5159 B).
    int8 (LLM.int8 Linear8bitLt): 1 byte + a float32 scale per output row.
    """
    if quant == "nf4":
        if double_quant:
            return 0.5 + 1.0 / NF4_BLOCK + 4.0 / (NF4_BLOCK * NF4_DQ_BLOCK)
        return 0.5 + 4.0 / NF4_BLOCK
    if quant == "int8":
        return 1.0 + (4.0 / in_features if in_features else 0.0)
    if quant == "none":
        return 0.0
    raise WorkloadError(f"unknown quantization {quant!r}; valid: none, int8, nf4")


def optimizer_state_bytes(optimizer: str, param_bytes: int) -> float:
    """Optimizer state per trained parameter. Adam/AdamW/Lion/momentum states take the parameter's
    dtype (torch creates them with ``zeros_like(param)``); 8-bit AdamW keeps two 8-bit states plus a
    float32 absmax per 2048-element block; Adafactor's factored second moment is ~0 per parameter
    (rows + columns, not rows × columns) and it keeps no first moment by default."""
    name = optimizer.removeprefix("paged-")
    if name in ("adam", "adamw"):
        return 2.0 * param_bytes
    if name == "adamw-8bit":
        return 2.0 + 2 * 4.0 / INT8_OPTIMIZER_BLOCK
    if name in ("momentum", "lion"):
        return float(param_bytes)
    if name in ("sgd", "none"):
        return 0.0
    if name == "adafactor":
        return 0.02 * param_bytes
    raise WorkloadError(f"unknown optimizer {optimizer!r}")


def optimizer_temp_bytes(optimizer: str, param_bytes: int) -> float:
    """Temporaries of one optimizer step per trained parameter: torch's foreach Adam(W) materialises
    ``sqrt(exp_avg_sq)`` for all parameters at once; 8-bit and paged optimizers update per tensor."""
    name = optimizer.removeprefix("paged-")
    return float(param_bytes) if name in ("adam", "adamw") and not optimizer.startswith("paged-") else 0.0


def is_paged(optimizer: str) -> bool:
    return optimizer.startswith("paged-")
