"""When the job does not fit on the cheap GPUs: which change would make it fit, and what that costs.

Each remedy is a changed workload (``plan.changes``: a smaller micro-batch with more accumulation steps, gradient
checkpointing, AMP, an 8-bit optimizer, a ZeRO stage on several GPUs, a one-GPU job sharded by ZeRO-3 over the
fewest GPUs it fits (its effective batch split over them), LoRA and CPU offload for LLMs; in serving, a smaller
batch); every one keeps the job's effective batch where it can and says so where it cannot (``plan.batch_remedy``);
those that keep the training the same are offered before those that change the method (LoRA, QLoRA); it is estimated
on the GPUs that were excluded for memory and are cheaper than the best option. Where every multi-GPU option was left
out because the effective batch does not split over it, the smallest effective batch that a fitting one splits
(``--effective-batch N``, with ``--sharding zero3`` where the job needs it too), priced as that recommendation's row.
One trace per remedy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from gpuwise.catalog.model import GPU, Catalog, Offer
from gpuwise.catalog.topology import topology_for
from gpuwise.plan.batch_remedy import batch_change_note, remedy_row, split_batch_remedy, unsplit_options
from gpuwise.plan.changes import (SHARD_GPU_COUNTS, SHARD_STAGE, Remedy, candidate_remedies, changes_method, makes_a_job,
                                  micro_batch_remedy, more_gpus_remedy, offload_remedies, per_gpu_layout,
                                  shard_over_gpus_remedy)
from gpuwise.plan.constraints import Constraints, JobSize, apply_constraints
from gpuwise.plan.profile import Correction, cannot_run, estimate_fit, model_for, serving_nodes_refusal
from gpuwise.plan.quote import Quote
from gpuwise.units import format_duration
from gpuwise.workload import Workload
from gpuwise.workload.decoder import is_llm
from gpuwise.workload.parallelism import effective_sharding

if TYPE_CHECKING:   # the recommendation whose excluded options a remedy rescues (recommend calls find_remedies)
    from gpuwise.plan.recommend import Recommendation


logger = logging.getLogger(__name__)

REMEDY_MIN_SAVING = 0.02    # a remedy must save at least 2% of the best option's cost to be news


def why_faster(job: Workload, remedied: Workload, step_s: float | None,
               step_of: Callable[[Workload], float | None]) -> str | None:
    """Why a remedy that adds CPU offload is faster than the job as it is (None: it is not, or adds none).
    Offload never speeds a step up: ZeRO-Offload runs under DeepSpeed (``effective_sharding``), whose mixed
    precision works on 16-bit weights and casts none per call as autocast does; the same job on that stack
    without the offload (``step_of``: a workload's step time on the same GPUs) is the like-for-like time."""
    if remedied.offload == job.offload or step_s is None:
        return None
    own_s = step_of(job)
    if own_s is None or step_s >= own_s:
        return None
    stack = effective_sharding(remedied)
    same_stack_s = step_of(job.with_(sharding=stack))
    words = {"zero2": "DeepSpeed ZeRO-2", "zero3": "DeepSpeed ZeRO-3", "fsdp": "FSDP"}.get(stack, stack)
    cause = ", whose 16-bit weights need none of autocast's casts" if job.precision_value.amp else ""
    return (f"faster than the job as it is ({format_duration(own_s)}) only by running under {words}{cause}: "
            f"--sharding {stack} without offload takes "
            f"{format_duration(same_stack_s) if same_stack_s is not None else 'an unknown time'}, and the offload "
            f"adds to that")


# How a recommendation prices one row of its table: (workload model, GPU, offer, count, effective batch) -> the
# row (``plan.recommend`` passes its own; this module cannot import it: recommend imports this one).
PriceOption = Callable[[object, GPU, Offer, int, int], Quote]


def find_remedies(
    rec: Recommendation, catalog: Catalog, job: JobSize, constraints: Constraints | None = None, *,
    progress: Callable[[str], None] | None = None, max_remedies: int = 4,
    model_factory: Callable[[Workload], object] | None = None, correction: Correction | None = None,
    price_option: PriceOption | None = None, job_model: object | None = None,
) -> tuple[dict, ...]:
    """For the GPU × count options excluded for memory that are cheaper per hour than the best option,
    the changes that make the job fit there, quoted for the whole job exactly as a row of the table is:
    ``price_option`` (the recommendation's own pricing of a row: its effective batch split into the largest
    micro-batch that fits × accumulation steps, its spot risk) on the changed workload, at the effective batch
    of the row it replaces. Without ``price_option`` no remedy can be priced as a row is, and none is offered.
    A remedy must meet the same constraints as any option (deadline, budget) and cost less than the best option
    as it is. For a training job (one GPU's, not yet fully sharded) the options of several GPUs excluded for
    memory are also tried under ``--sharding zero3`` (``shard_over_gpus_remedy``): on each GPU the fewest that
    fit, the cheapest of them offered. Remedies that keep the training the same come first, those that change
    the method (``changes_method``: LoRA, QLoRA) after, each group cheapest first. Where every multi-GPU option
    that runs the job was left out because its effective batch does not split over it or it ran out of memory
    (``unsplit_options``; some left out for the split), the
    job at the smallest effective batch a fitting one splits (``split_batch_remedy``): ``--effective-batch N``,
    priced as the row of ``recommend(..., effective_batch=N)``. Each remedy's ``batch_note`` says how it changes the
    effective batch (``grown_batch_note``; None where it keeps it). ``model_factory``: workload -> workload model
    (default: ``model_for``, which traces, with ``correction``: the user's calibration the recommendation used);
    ``job_model``: the recommendation's own model of the job (default: made by ``model_factory``)."""
    constraints = constraints or Constraints()
    out_of_memory = [o for o in rec.options if o.fits is False and o.peak_total_bytes is not None]
    # training: the options of one GPU (several GPUs of a kind are the ZeRO-3 remedy's, below); serving: every count,
    # as quantized or half-precision weights shrink a model split over several GPUs as they do one GPU's
    oom = [o for o in out_of_memory if o.count == 1 or not rec.workload.is_training]
    if rec.best is not None:
        oom = [o for o in oom if o.price_per_hour_ranked < rec.best.price_per_hour_ranked]
    shard = shard_over_gpus_remedy(rec.workload)
    sharded_oom = [o for o in out_of_memory if o.count > 1] if shard is not None else []
    unsplit = unsplit_options(rec.options)
    if not oom and not sharded_oom and not unsplit:
        return ()
    if price_option is None:
        logger.warning("remedies are priced as the recommendation's rows are: no price_option given, none offered")
        return ()
    oom.sort(key=lambda o: o.price_per_hour_ranked)
    gpus = {g.id: g for g in catalog.gpus}
    make = model_factory or (lambda w: model_for(w, progress, correction=correction))

    def priced(w: Workload, model, target, effective_batch: int | None = None) -> Quote | None:
        """``target``'s row for the changed job ``w``, if it fits and meets the constraints (None: not), at
        ``effective_batch`` (default: the row's, the recommendation's effective batch, not the workload's own)."""
        gpu = gpus[target.gpu]
        if cannot_run(w, gpu):      # e.g. --precision amp-bf16 on a GPU without bf16
            return None
        quote = price_option(model, gpu, target.offer, target.count, effective_batch or target.effective_batch_size)
        if not quote.fits or quote.total_time_s is None:
            return None
        (quote,) = apply_constraints([quote], constraints, rec.ranking_currency)
        if not quote.eligible:
            return None
        layout = dict(batch_size=quote.batch_size, grad_accum_steps=quote.grad_accum_steps)
        return replace(quote, why_faster=why_faster(
            rec.workload, w, quote.step_time_s,
            lambda job_w: _step_s(make(job_w), gpu, target.count, target.provider, **layout)))

    results = []
    if sharded_oom:
        # the job as it is on several GPUs of a kind that ran out of memory, ZeRO-3 partitioning its state: on
        # each GPU the fewest that fit, the cheapest of those (the same training: before any change of method)
        w = shard.apply(rec.workload)
        model = make(w)
        fewest: dict[str, Quote] = {}
        for target in sorted(sharded_oom, key=lambda o: (o.gpu, o.count, o.price_per_hour_ranked)):
            if target.gpu in fewest or (quote := priced(w, model, target)) is None:
                continue
            fewest[target.gpu] = quote
        if fewest:
            quote = min(fewest.values(), key=lambda q: (q.total_cost_ranked, q.count))
            results.append(remedy_row(shard.change, quote, quote.effective_batch_size))
    # the changes of the job itself (sharding over several GPUs is the one above), for the options in ``oom``
    remedies = [r for r in candidate_remedies(rec.workload, rec.method == "closed-form", micro_batch=False)
                if "sharding" not in r.workload_fields]
    method_of = {shard.change: False} if shard is not None else {}
    for remedy in remedies[:max_remedies if oom else 0]:
        w = remedy.apply(rec.workload)
        model = make(w)
        method_of[remedy.change] = changes_method(remedy)
        for target in oom:   # cheapest first: the cheapest GPU this remedy rescues is the news
            if (quote := priced(w, model, target)) is not None:
                results.append(remedy_row(remedy.change, quote, quote.effective_batch_size))
                break
    if unsplit:
        variants = [(None, rec.workload)] + ([(shard, shard.apply(rec.workload))] if shard is not None else [])
        models = {None: job_model} if job_model is not None else {}

        def quote_at(remedy: Remedy | None, w: Workload, target, effective_batch: int) -> Quote | None:
            if remedy not in models:    # one model per variant, made only where a count reaches it
                models[remedy] = make(w)
            return priced(w, models[remedy], target, effective_batch)

        if (found := split_batch_remedy(unsplit, variants, quote_at)) is not None:
            change, quote = found
            method_of[change] = False      # the same training, on more GPUs
            results.append(remedy_row(change, quote, unsplit[0].effective_batch_size))
    if rec.best is not None:  # a remedy that costs more than the best option as it is, is no remedy
        results = [r for r in results if r["total_cost_ranked"] < (1.0 - REMEDY_MIN_SAVING) * rec.best.total_cost_ranked]
    # those that keep the training the same first (``changes_method``), each group cheapest first
    results.sort(key=lambda r: (method_of[r["change"]], r["total_cost_ranked"]))
    return tuple(results)


def changes_that_fit(
    workload: Workload, gpu, *, headroom_fraction: float, closed_form: bool,
    model_factory: Callable[[Workload], object] | None = None, progress: Callable[[str], None] | None = None,
    provider: str | None = None, correction: Correction | None = None,
) -> tuple[dict, ...]:
    """For a job that does not fit ``gpu``: each single change that makes it fit, with its flags, the
    memory it needs, its step time and ``batch_note`` (``batch_change_note``: None where it keeps the effective
    batch), those that keep the training the same first, then those that keep the method at another effective
    batch, then those that change the method (``changes_method``), each group fastest first (a step is then
    one optimizer step on the same samples); among them the job sharded by ZeRO-3 over the fewest of these GPUs
    it fits (``--num-gpus N --sharding zero3``, N in ``SHARD_GPU_COUNTS``, its effective batch split over them;
    its memory is one GPU's, its step all N's); when no single change is enough, the changes
    taken together in order, the first combination that fits. ``provider``: whose machines the GPUs
    are in (their links), as for the estimate the job did not fit."""
    make = model_factory or (lambda w: model_for(w, progress, correction=correction))

    def quote(flags: str, w: Workload) -> dict | None:
        if cannot_run(w, gpu):
            return None
        est = make(w).estimate(gpu, count=w.num_gpus, provider=provider)
        if not estimate_fit(est, headroom_fraction).fits:
            return None
        step_s = est.time.step_time_s if est.time is not None else None
        return {"change": flags, "peak_total_bytes": est.memory.total_upper_bytes,
                "gpu_memory_bytes": gpu.visible_memory_bytes, "step_time_s": step_s,
                "cpu_offload_bytes": est.cpu_offload_bytes, "batch_note": batch_change_note(workload, w),
                "why_faster": why_faster(workload, w, step_s,
                                         lambda job: _step_s(make(job), gpu, job.num_gpus, provider))}

    def runnable(w: Workload) -> list[Remedy]:
        """The changes of ``w`` that ``gpu`` runs (``cannot_run``: no bf16 precision on a GPU without it)."""
        return [r for r in candidate_remedies(w, closed_form) if not cannot_run(r.apply(w), gpu)]

    singles = [(r, q) for r in runnable(workload) if (q := quote(r.change, r.apply(workload)))]
    # the job as it is over the fewest GPUs of this kind it fits (``more_gpus_remedy``: ZeRO-3 in training, tensor
    # parallelism or HF's layer split in serving), each count estimated as the job on those GPUs: the same job
    for count in SHARD_GPU_COUNTS:
        more = more_gpus_remedy(workload, count, closed_form)
        if more is None or not makes_a_job(more, workload) or _count_refused(more.apply(workload), gpu, provider, make):
            continue
        if found := quote(more.change, more.apply(workload)):
            singles.append((more, found))
            break
    if singles:
        # the same training first, then the same method at another effective batch, then another method
        return tuple(q for _r, q in sorted(singles, key=lambda rq: (
            changes_method(rq[0]), rq[1]["batch_note"] is not None,
            rq[1]["step_time_s"] if rq[1]["step_time_s"] is not None else 0.0)))
    # No single change is enough: apply them one after another until the job fits, then drop each
    # change the others make unnecessary (the answer names only what is needed).
    taken: list[Remedy] = []
    w = workload
    while not (found := quote(_flags(taken), w)):
        # each kind of change once, in order; only when all are taken, a stronger one of a kind taken: the
        # micro-batch halves again, the next ZeRO stage, the weights offloaded too, QLoRA after LoRA
        options = {t.change.split()[0] for t in taken}
        steps = [r for r in runnable(w) if r.change.split()[0] not in options]
        steps = steps or runnable(w)
        if not steps:
            return ()
        taken.append(steps[0])
        w = steps[0].apply(w)
    for r in list(taken):
        rest = [t for t in taken if t is not r]
        if rest and (smaller := quote(_flags(rest), _apply_all(workload, rest))):
            taken, found = rest, smaller
    return (found,)


ACTIVATIONS_MOST = 0.5     # activations above this share of the peak: sharding the model state cannot cure it


def no_change_fits_advice(workload: Workload, memory) -> str:
    """What to try where no change tried makes the job fit a GPU (``changes_that_fit`` found none), from the
    ``memory`` of the job as it is (a ``MemoryEstimate`` or its JSON). Where the activations are most of the peak,
    ZeRO-3/FSDP is no cure (they partition weights, gradients and optimizer state, never activations): sequence
    (context) parallelism would split them, which gpuwise does not model."""
    get = memory.get if isinstance(memory, dict) else (lambda key: getattr(memory, key))
    activations, peak = get("activations_bytes") or 0, get("peak_allocated_bytes") or 0
    if workload.is_training and peak and activations > ACTIVATIONS_MOST * peak:
        return (f"the activations are {activations / peak:.0%} of the peak, and ZeRO-3/FSDP shard weights, gradients "
                "and optimizer state, never activations: more GPUs with --sharding zero3 would not make it fit. "
                "Sequence (context) parallelism splits a sequence's activations over GPUs, which gpuwise does not "
                "model; a shorter --seq-len (or --image-size), or a GPU with more memory (gpuwise recommend), would")
    # changes_that_fit tried up to 8 (``more_gpus_remedy``; the closed form is ``model_for``'s rule, ``is_llm``)
    tried = more_gpus_remedy(workload, SHARD_GPU_COUNTS[-1], closed_form=is_llm(workload)) is not None
    beyond = f", more than the {SHARD_GPU_COUNTS[-1]} tried" if tried else ""
    more = ("--num-gpus N, tensor parallel" if not workload.is_training
            else f"--num-gpus N with --sharding {SHARD_STAGE}") + beyond
    return f"try more GPUs ({more}) or a larger GPU (gpuwise recommend)"


def _count_refused(w: Workload, gpu, provider: str | None, make: Callable[[Workload], object]) -> bool:
    """Whether ``w`` cannot be split over its GPUs: the heads do not split over them (``count_refusal``, vLLM's
    rule), or a server's one replica would span machines (``serving_nodes_refusal``), as ``recommend`` excludes
    such counts."""
    if w.is_training:
        return False
    return bool(make(w).count_refusal(w.num_gpus) or serving_nodes_refusal(w, w.num_gpus, topology_for(gpu, provider)))


def _step_s(model, gpu, count: int, provider: str | None, **layout) -> float | None:
    """The step time of ``model``'s job on ``count`` of ``gpu`` (None: not timed there); ``layout``: the
    micro-batch and accumulation steps it runs at (``batch_size``, ``grad_accum_steps``; default the job's own)."""
    est = model.estimate(gpu, count=count, provider=provider, **layout)
    return est.time.step_time_s if est.time is not None else None


def _apply_all(w: Workload, remedies: list[Remedy]) -> Workload:
    for r in remedies:
        w = r.apply(w)
    return w


def _flags(remedies: list[Remedy]) -> str:
    """The flags as typed: a later change of the same option replaces an earlier one (two halvings)."""
    merged: dict[str, str] = {}
    for r in remedies:
        merged[r.change.split()[0]] = r.change
    return " ".join(merged.values())



# the changes themselves (plan.changes) and their batch note (plan.batch_remedy), where callers import them from
__all__ = ["REMEDY_MIN_SAVING", "PriceOption", "batch_change_note", "candidate_remedies", "changes_method",
           "changes_that_fit", "find_remedies", "micro_batch_remedy", "no_change_fits_advice", "offload_remedies",
           "per_gpu_layout", "shard_over_gpus_remedy", "why_faster"]
