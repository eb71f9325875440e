"""Bytes per parameter: how weights, gradients and optimizer state are stored for each setting."""

from __future__ import annotations

from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.precision import parse

NF4_BLOCK = 64                 # bitsandbytes 4-bit: one absmax per 64 weights
NF4_DQ_BLOCK = 256             # double quantization: one float32 absmax per 256 first-level absmaxes
INT8_OPTIMIZER_BLOCK = 2048    # bitsandbytes 8-bit optimizers: block-wise quantized state
FP8_BLOCK = 128                # FP8 checkpoints (DeepSeek-V3's quantization_config): a float32 scale per 128 x 128
# Integer weight-only formats of AWQ / GPTQ / compressed-tensors checkpoints (workload/checkpoint.py): bits a weight
WEIGHT_ONLY_QUANTS = {"w4a16": 4, "w8a16": 8}


# --kv-cache-dtype: bytes an element of the KV cache ("auto": None, the compute dtype's). fp8_e4m3 and fp8_e5m2 are
# vLLM's names for its two FP8 caches; int8 and int4 transformers' quantized caches (QuantizedCache).
KV_CACHE_BYTES = {"auto": None, "fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0,
                  "int8": 1.0, "int4": 0.5}
VLLM_KV_CACHE_DTYPES = ("auto", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2")    # vLLM's --kv-cache-dtype choices
# HF generate's: the model's own dtype (DynamicCache), or transformers' QuantizedCache, whose codes are integers
# (quanto: 2 or 4 bits, HQQ: 1-4 or 8; transformers 4.57 cache_utils): it has no FP8 cache, which is vLLM's
HF_KV_CACHE_DTYPES = ("auto", "fp32", "bf16", "fp16", "int8", "int4")
HF_FLOAT_KV_CACHE_DTYPES = ("fp32", "bf16", "fp16")   # HF generate holds these only as the compute dtype


def kv_cache_bytes_per_element(kv_cache_dtype: str, precision) -> float:
    """Bytes an element of the KV cache holds under ``kv_cache_dtype`` (``KV_CACHE_BYTES``; "auto": the compute
    dtype's, ``compute_bytes``). WorkloadError for a dtype not in the table."""
    if kv_cache_dtype not in KV_CACHE_BYTES:
        raise WorkloadError(f"unknown KV cache dtype {kv_cache_dtype!r}; valid: {', '.join(KV_CACHE_BYTES)}")
    return KV_CACHE_BYTES[kv_cache_dtype] or float(compute_bytes(precision))


def compute_bytes(precision) -> int:
    """Bytes per element of activations (``Precision.activation_bytes``): float32 for fp32/tf32, 16-bit otherwise."""
    return parse(precision).activation_bytes


def trainable_bytes(precision) -> int:
    """Storage of trained parameters and their gradients (``Precision.master_bytes``): float32 master
    weights under fp32, tf32 and AMP; 16-bit under pure fp16/bf16 (LitGPT's ``bf16-true``)."""
    return parse(precision).master_bytes


# DeepSpeed ZeRO-Offload keeps its CPU partitions (masters, gradients, states) in float32 whatever the training
# precision (stage_1_and_2's single_partition_of_fp32_groups, stage3's fp32_partitioned_groups_flat)
ZERO_OFFLOAD_ELEMENT_BYTES = 4


def offloaded_element_bytes(precision, sharding: str) -> int:
    """Bytes an element of the trained model state ``--offload`` keeps in host RAM, and so of each gradient copied
    out to it: float32 under DeepSpeed ZeRO-Offload (``ZERO_OFFLOAD_ELEMENT_BYTES``); the parameters' own dtype under
    FSDP's CPUOffload (``sharding`` "fsdp"), whose pinned CPU gradient buffer matches the sharded parameter
    (``trainable_bytes``: float32 masters under AMP)."""
    return trainable_bytes(precision) if sharding == "fsdp" else ZERO_OFFLOAD_ELEMENT_BYTES


def frozen_bytes(precision) -> int:
    """Storage of frozen, unquantized weights: fine-tuning recipes load the base model in 16-bit
    (``torch_dtype=bfloat16``) whenever the step computes in 16-bit."""
    return parse(precision).activation_bytes


def quant_bytes_per_param(quant: str, *, double_quant: bool = True, out_features: int = 0, in_features: int = 0,
                          group_size: int = 128, zero_point: bool = False) -> float:
    """Bytes per weight of a quantized linear layer.

    nf4 (bitsandbytes Linear4bit): 4 bits + a float32 absmax per 64 weights (0.5625 B); with double
    quantization the absmaxes are 8-bit, plus one float32 per 256 of them (0.5159 B).
    int8 (LLM.int8 Linear8bitLt): 1 byte + a float32 scale per output row.
    fp8 (a checkpoint stored in float8 e4m3, ``quantization_config.weight_block_size`` 128 x 128, as DeepSeek-V3's):
    1 byte + a float32 scale (``weight_scale_inv``) per 128 x 128 block.
    w4a16 / w8a16 (AWQ, GPTQ, compressed-tensors integer weight-only, as vLLM's Marlin layers hold them after
    loading): 4 or 8 bits packed, a 16-bit scale per ``group_size`` inputs (-1: per output row, over
    ``in_features``), and with ``zero_point`` a zero point packed at the weight's width per group.
    """
    if quant == "nf4":
        if double_quant:
            return 0.5 + 1.0 / NF4_BLOCK + 4.0 / (NF4_BLOCK * NF4_DQ_BLOCK)
        return 0.5 + 4.0 / NF4_BLOCK
    if quant == "int8":
        return 1.0 + (4.0 / in_features if in_features else 0.0)
    if quant == "fp8":
        return 1.0 + 4.0 / (FP8_BLOCK * FP8_BLOCK)
    if quant in WEIGHT_ONLY_QUANTS:
        bits = WEIGHT_ONLY_QUANTS[quant]
        group = group_size if group_size > 0 else in_features
        per_group = (2.0 + (bits / 8.0 if zero_point else 0.0)) / group if group else 0.0
        return bits / 8.0 + per_group
    if quant == "none":
        return 0.0
    raise WorkloadError(f"unknown quantization {quant!r}; valid: none, int8, nf4, fp8, w4a16, w8a16")


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


# Passes over the trained parameters' size that torch.optim's multi-tensor (foreach) and for-loop steps make, per
# parameter in units of its bytes (reads + writes of each _foreach_* kernel, as the traced path records them):
# SGD: p += g (3); momentum: buf *= m, buf += g, p += buf (8); Adam: lerp_(m, g), v *= b2, addcmul_(v, g, g),
# sqrt(v), / bias correction, + eps, addcdiv_(p, m, denom) (19); AdamW also decays p (21); Lion and
# Adafactor as traced (gpuwise.trace.optimizers). Fused kernels (``--optimizer-impl fused``; bitsandbytes'
# 8-bit and paged optimizers, always: one kernel per parameter) read parameter, gradient and states once and
# write parameter and states once.
_UNFUSED_STEP_PASSES = {"sgd": 3, "momentum": 8, "adam": 19, "adamw": 21, "lion": 13, "adafactor": 19}
FUSED_IMPL_OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")     # torch has a fused kernel for these


def optimizer_step_bytes(optimizer: str, param_bytes: int, impl: str = "foreach", *,
                         grad_scaler: bool = False) -> float:
    """Bytes one optimizer step moves through GPU memory per trained parameter (``impl``: foreach, fused or
    for-loop, as ``Workload.optimizer_impl``, torch's; bitsandbytes' 8-bit and paged optimizers are one fused
    kernel whatever it says); ``grad_scaler``: fp16 autocast's GradScaler first unscales
    every gradient in place (one read, one write)."""
    name = optimizer.removeprefix("paged-")
    if name == "none":
        return 0.0
    unscale = 2.0 * param_bytes if grad_scaler else 0.0
    fused = is_paged(optimizer) or name == "adamw-8bit" or (impl == "fused" and name in FUSED_IMPL_OPTIMIZERS)
    if fused or name not in _UNFUSED_STEP_PASSES:
        return 3.0 * param_bytes + 2.0 * optimizer_state_bytes(optimizer, param_bytes) + unscale
    return _UNFUSED_STEP_PASSES[name] * param_bytes + unscale


def optimizer_temp_bytes(optimizer: str, param_bytes: int) -> float:
    """Temporaries of one optimizer step per trained parameter: torch's foreach Adam(W) materialises
    ``sqrt(exp_avg_sq)`` for all parameters at once; 8-bit and paged optimizers update per tensor."""
    name = optimizer.removeprefix("paged-")
    return float(param_bytes) if name in ("adam", "adamw") and not optimizer.startswith("paged-") else 0.0


def is_paged(optimizer: str) -> bool:
    return optimizer.startswith("paged-")
