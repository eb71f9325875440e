"""The forward a generating job traces: HF ``generate``'s prefill of the prompts.

``generate`` (transformers 4.45 and later) asks a model whose forward takes ``logits_to_keep`` for one position's
logits (``logits_to_keep=1``): the prefill never holds batch x prompt x vocab of them, which for a small decoder with
a large vocabulary (GPT-2: 50,257) is most of the forward's memory and a large share of its GEMMs. A model without
the argument (OPT, BLOOM, GPT-J) computes every position's, as its traced forward does. This module imports no torch,
so the cache key (``trace/cache.py``) can ask :func:`generates` before a trace.
"""

from __future__ import annotations

import inspect

PREFILL_LOGITS_TO_KEEP = 1     # the positions HF generate asks the prefill for: the last one, its next token


def generates(workload) -> bool:
    """Whether the job generates tokens: serving with ``--max-new-tokens`` N > 0 (the one home of the rule)."""
    return not workload.is_training and workload.max_new_tokens > 0


def takes_logits_to_keep(module) -> bool:
    """Whether ``module``'s forward has transformers' ``logits_to_keep`` parameter (HF generate's own test)."""
    try:
        return "logits_to_keep" in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):     # no signature to read
        return False


def prefill_kwargs(module, workload, is_hf: bool) -> dict:
    """What HF generate adds to the prompts' forward of ``workload`` on ``module``: ``logits_to_keep`` where it
    generates and the model takes it; nothing otherwise (a plain forward, a factory's model, training)."""
    if is_hf and generates(workload) and takes_logits_to_keep(module):
        return {"logits_to_keep": PREFILL_LOGITS_TO_KEEP}
    return {}
