"""The one rule for an effective batch that does not split evenly over a count of GPUs: the batch it grows to.

Its own module so that both the words that leave such an option out (``plan.reasons.batch_does_not_split``) and
the remedies that run the job at that batch (``plan.batch_remedy``, ``plan.changes.per_gpu_layout``) use it:
``plan.reasons`` is imported by the modules above it and can import none of them."""

from __future__ import annotations


def splitting_batch(effective_batch: int, count: int) -> int:
    """The smallest effective batch (samples per optimizer step) at or above ``effective_batch`` that splits
    evenly over ``count`` GPUs: the batch a job grows to where its own does not split (1 over 2 GPUs: 2)."""
    return -(-effective_batch // count) * count
