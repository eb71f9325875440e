"""Generation (``--max-new-tokens``) on top of a traced forward of the prompts: HF generate's KV cache.

The tracer runs one forward of the prompts without a cache (``use_cache=False``). HF ``generate`` keeps every
layer's K and V of every token (a ``DynamicCache``), so the traced peak misses them. As the closed form counts
serving (``gpuwise.memory.llm.infer_memory``), the peak is the larger of

- the prefill: the traced forward with the prompts' KV cache filled beside it, and
- the last decode step: what stays between forwards (weights, library workspace), the whole KV cache
  (prompt + answer) and one position's logits (``llm_activations.decode_logits_bytes``),

and the breakdown reports the KV cache as ``other_bytes``. The cache grows one token at a time through the
caching allocator: it is churning memory, reserved with the closed form's factor for it (``DYNAMIC_RESERVE``),
and its fragmentation is guessed as the closed form's is (``CLOSED_FORM_RESERVE_SPREAD``, on the upper side).
The KV bytes themselves come from the model's config by the closed form's rule
(``DecoderArch.kv_cache_bytes``); ``gpuwise.plan.generation`` computes them.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwise.memory.estimate import PEAK_PHASE_NOTE
from gpuwise.memory.llm import DYNAMIC_RESERVE
from gpuwise.memory.model import MemoryEstimate
from gpuwise.memory.uncertainty import CLOSED_FORM_RESERVE_SPREAD, TRACED_RESERVED_SPREAD

RESERVE_ROUNDING_BYTES = 2 << 20     # the caching allocator's large segments are 2 MiB multiples
KV_CACHE_NOTE = "other_bytes is the KV cache at the peak"


def _reserved(nbytes: float) -> int:
    """``nbytes`` of churning memory as the allocator reserves it, rounded up to whole 2 MiB."""
    grown = nbytes * (1 + DYNAMIC_RESERVE)
    return int(-(-grown // RESERVE_ROUNDING_BYTES) * RESERVE_ROUNDING_BYTES)


def with_kv_cache(forward: MemoryEstimate, *, prompt_kv_bytes: int, total_kv_bytes: int,
                  decode_activation_bytes: int) -> MemoryEstimate:
    """``forward`` (a traced forward of the prompts, no cache) as HF generate's peak: the larger of the prefill
    (``forward`` + ``prompt_kv_bytes``) and the last decode step (weights + workspace + ``total_kv_bytes`` +
    ``decode_activation_bytes``). Bytes are per GPU; the notes gain ``KV_CACHE_NOTE``."""
    resident = forward.weights_bytes + forward.workspace_bytes
    prefill_bytes = forward.peak_allocated_bytes + prompt_kv_bytes
    decode_bytes = resident + total_kv_bytes + decode_activation_bytes
    # the allocator keeps what the prefill reserved; the decode's cache reuses it where it can (max, not sum)
    prefill_reserved = forward.peak_reserved_bytes + _reserved(prompt_kv_bytes)
    decode_reserved = max(forward.peak_reserved_bytes,
                          resident + _reserved(total_kv_bytes + decode_activation_bytes))
    reserved = max(prefill_reserved, decode_reserved, prefill_bytes, decode_bytes)
    if decode_bytes > prefill_bytes:
        kv_at_peak = total_kv_bytes
        traced_phase = PEAK_PHASE_NOTE.split("{")[0]        # the forward's own peak is not this one
        notes = tuple(n for n in forward.notes if not n.startswith(traced_phase))
        parts = dict(peak_allocated_bytes=decode_bytes, activations_bytes=decode_activation_bytes,
                     other_bytes=total_kv_bytes, gradients_bytes=0, optimizer_bytes=0, top_modules=(),
                     notes=notes + ("generating, the peak is at the last decode step (the whole KV cache)",
                                    KV_CACHE_NOTE))
    else:
        kv_at_peak = prompt_kv_bytes
        parts = dict(peak_allocated_bytes=prefill_bytes, other_bytes=forward.other_bytes + prompt_kv_bytes,
                     notes=forward.notes + ("generating, the peak is at the prefill (the prompts' forward beside their "
                                            "KV cache)", KV_CACHE_NOTE))
    uncertainty = dict(forward.uncertainty)
    uncertainty["allocator"] = int(reserved * TRACED_RESERVED_SPREAD)     # traced_uncertainty's, on the new reserve
    uncertainty["kv_cache_fragmentation"] = int(kv_at_peak * CLOSED_FORM_RESERVE_SPREAD)
    return replace(forward, **parts, peak_reserved_bytes=reserved, total_bytes=reserved + forward.cuda_context_bytes,
                   uncertainty=tuple(uncertainty.items()))
