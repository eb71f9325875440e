"""How a remedy changes the job's effective batch (samples per optimizer step), in words, and the remedy that
changes it on purpose: where every multi-GPU option was left out because the effective batch does not split over it,
the smallest effective batch that a fitting one splits (``--effective-batch N``, with ``--sharding zero3`` where the
job needs it too), priced as that recommendation's row."""

from __future__ import annotations

from collections.abc import Callable

from gpuwise.plan.batch_split import splitting_batch
from gpuwise.plan.changes import Remedy
from gpuwise.plan.quote import Quote
from gpuwise.plan.reasons import CANNOT_RUN, COUNT, OOM, OOM_RISK, SPLIT
from gpuwise.units import format_count
from gpuwise.workload import Workload


def batch_change_note(job: Workload, changed: Workload) -> str | None:
    """What a change does to the job's effective batch (samples per optimizer step), in words; None where it keeps
    it, as every remedy does that can: a smaller micro-batch adds accumulation steps, sharding over N GPUs splits
    the batch over them (``per_gpu_layout``). Only a batch that does not split evenly over the GPUs grows: "effective
    batch 4 samples per optimizer step instead of 1 (batch 1 per GPU × 4 GPUs, as 1 does not split evenly over 4)"."""
    if not job.is_training:
        return None
    return grown_batch_note(job.effective_batch_size, changed.effective_batch_size, changed.num_gpus,
                            old_count=job.num_gpus)


def grown_batch_note(old: int, new: int, count: int, *, old_count: int = 1) -> str | None:
    """``batch_change_note`` in numbers: a training job's effective batch ``old`` on ``old_count`` GPUs, run as
    ``new`` on ``count`` (None where ``new`` is ``old``)."""
    if new == old:
        return None
    why = f", as {old} does not split evenly over {count}" if count != old_count and old % count else ""
    layout = f" (batch {new // count} per GPU × {count} GPUs{why})" if count > 1 else ""
    return f"effective batch {format_count(new, 'sample')} per optimizer step instead of {old}{layout}"


def remedy_row(change: str, quote: Quote, replaced_batch: int) -> dict:
    """A remedy as ``--json`` lists it: the change as typed, its row's fields, and ``batch_note``: how it changes
    the effective batch of the row it replaces, ``replaced_batch`` (``grown_batch_note``; None where it keeps it)."""
    return {"change": change, **quote.to_dict(),
            "batch_note": grown_batch_note(replaced_batch, quote.effective_batch_size, quote.count)}


def unsplit_options(options) -> list[Quote]:
    """The multi-GPU options left out because the effective batch does not split evenly over their GPUs, where no
    other multi-GPU option runs the job: each was refused before it (for bf16 or the count) or ran out of memory,
    as a 70B full fine-tune at effective batch 4 does on 2 and 4 GPUs while 8 and more, which it does not split
    over, would hold it; empty otherwise (some count splits it and fits: the table prices that one)."""
    runs = [o for o in options if o.count > 1 and (o.exclusion is None or o.exclusion.kind not in (CANNOT_RUN, COUNT))]
    unsplit = [o for o in runs if o.exclusion is not None and o.exclusion.kind == SPLIT]
    out_of_memory = [o for o in runs if o.exclusion is not None and o.exclusion.kind in (OOM, OOM_RISK)]
    return unsplit if len(unsplit) + len(out_of_memory) == len(runs) else []


def split_batch_remedy(
    unsplit: list[Quote], variants: list[tuple[Remedy | None, Workload]],
    quote_at: Callable[[Remedy | None, Workload, Quote, int], Quote | None],
) -> tuple[str, Quote] | None:
    """For the options ``unsplit`` left out (``unsplit_options``): the change as typed and its row, at the smallest
    effective batch that some of them fit at, the cheapest of those. Counts are tried fewest first, each at
    ``splitting_batch`` of the job's effective batch over it (the fewest GPUs grow the batch least), each count
    with ``variants`` in order ((None, the job as it is), then (the shard remedy, the job under it)), the first
    that fits any GPU of that count wins. ``quote_at(remedy, workload, option, effective_batch)``: the option's
    row for that variant at that batch, None where it does not fit or meets no constraint."""
    effective = unsplit[0].effective_batch_size
    for count in sorted({o.count for o in unsplit}):
        batch = splitting_batch(effective, count)
        for remedy, w in variants:
            quotes = [q for o in unsplit if o.count == count and (q := quote_at(remedy, w, o, batch)) is not None]
            if quotes:
                change = " ".join([f"--effective-batch {batch}", *([remedy.change] if remedy is not None else [])])
                return change, min(quotes, key=lambda q: q.total_cost_ranked)
    return None
