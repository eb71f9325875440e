"""The baselines the accuracy sets report on their own rows: for time (issue 28) a plain roofline and roofline / 0.75;
for LLM memory the closed form of Transformer Math 101 (``transformer_math_bytes``, below).

Plain roofline: per operator of the same trace, max(FLOPs / datasheet peak of the precision the
kernel runs in, bytes / datasheet bandwidth), summed; no efficiency, no launch or host cost. The
per-operator figure is the one the time model itself carries (``OpFeatures.roofline_s``), so the
baseline reads the same precision rule as the model. Roofline / 0.75 is the one-constant model:
every operator at 75% of its roofline rate.
"""

from __future__ import annotations

from benchmarks.harness import ROOFLINE, ROOFLINE_075
from gpuwise.runtime.predict import roofline_step_s as _roofline_step_s

ONE_CONSTANT = 0.75


def roofline_step_s(trace, gpu) -> float:
    """Plain roofline time of one step of ``trace`` on ``gpu`` (seconds): every traced op as traced
    (``runtime.predict.roofline_step_s`` without compile's fusion, so a compiled case keeps the baseline's
    definition)."""
    return _roofline_step_s(trace, gpu, compiled_fusion=False)


def roofline_baselines(trace, gpu) -> dict[str, float]:
    """{'roofline': s, 'roofline / 0.75': s}: the two baselines of a step time, by harness name."""
    roof = roofline_step_s(trace, gpu)
    return {ROOFLINE: roof, ROOFLINE_075: roof / ONE_CONSTANT}


# ---- memory: the closed form a user reaches for first ----------------------------------------------------------
TRANSFORMER_MATH = "Transformer Math closed form"
# EleutherAI's "Transformer Math 101" (Anthony, Biderman, Schoelkopf, 2023): memory = model + gradients + optimizer
# + activations. Bytes per parameter of the weights by their precision; an adapter's (LoRA's) parameter, outside the
# base model, its 16-bit weight and gradient and its mixed-precision AdamW state (a float32 copy, momentum and
# variance: 12 bytes).
WEIGHT_BYTES_PER_PARAM = {"bf16": 2.0, "int8": 1.0, "nf4": 0.5}
ADAPTER_BYTES_PER_PARAM = 2.0 + 2.0 + 12.0
# Activations per layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
# 16-bit, no tensor parallelism): s·b·h·(34 + 5·a·s/h) bytes; the 5·a·s/h term is the attention matrix, which a
# fused (flash) attention does not keep, leaving 34·s·b·h.
ACTIVATION_BYTES_PER_TOKEN_HIDDEN_LAYER = 34.0


def transformer_math_bytes(arch, *, batch: int, tokens: int, weights: str = "bf16", adapter_params: int = 0,
                           training: bool = True) -> float:
    """Peak memory of one step by Transformer Math 101's closed form, on ``arch`` (a ``DecoderArch``): the weights
    at ``weights``'s bytes per parameter, ``adapter_params`` with their gradients and AdamW state, and in training
    the activations of every layer with fused attention (34·s·b·h per layer), in generation the KV cache of
    ``tokens``. No logits, no allocator, no CUDA context: what the closed form leaves out is what it scores."""
    total = arch.param_counts().total * WEIGHT_BYTES_PER_PARAM[weights] + adapter_params * ADAPTER_BYTES_PER_PARAM
    if training:
        return total + ACTIVATION_BYTES_PER_TOKEN_HIDDEN_LAYER * tokens * batch * arch.hidden_size * arch.num_layers
    return total + arch.kv_cache_bytes(tokens, batch, mla_latent=False)
