"""The ``estimate`` answer for one workload: memory, fit and spare memory on a GPU, step and job time,
the largest batch, every catalog GPU, and — when it does not fit — the changes that would. A GPU count the
job cannot be split over (tensor-parallel heads) is refused (PlanError), by the rule recommend excludes it by.

This is the public JSON contract of ``gpuwise estimate --json`` (DESIGN.md); the CLI only renders it.

``fits`` (and ``fit_summary``, ``spare_bytes``, ``max_batch_size``, each ``per_gpu`` row's ``fits`` and
``spare_bytes``) is memory only, one rule (``plan.profile.estimate_fit``): the peak against the GPU's usable
memory; serving with ``--engine vllm``, vLLM's reservation holding the weights, a prefill and the batch's KV
cache (``spare_bytes``: what the reservation has left after them). Whether the job can run there at all is
``cannot_run``: None where it can, else why not (bf16 on a GPU without it), whatever the memory. A job
runs on a GPU where ``fits`` is true and ``cannot_run`` is None; where ``cannot_run`` is set, ``time``
(and a row's step time) is None and ``changes_that_fit`` is empty (no memory change lets it run). On the
one GPU asked about (``--gpu NAME``) a job that cannot run there is refused (PlanError, exit 2: a named
precision the GPU lacks says which it runs), so ``cannot_run`` is set only in the ``per_gpu`` rows.
Without ``--precision`` (``workload.precision_default``) each GPU runs the default rule's precision
there (a bf16 default at fp16 on a GPU without bf16): each ``per_gpu`` row names its ``precision``.

``time.likely_step_time_range_s`` (and each ``per_gpu`` row's) is where 8 in 10 held-out public runs
of the same regime measured given the prediction (``time.regime``: runtime/accuracy.py's ``REGIMES``), or None;
where none is, ``time.likely_range_note`` says why (plan/accuracy.py's ``why_no_range``: "no held-out run
measures this (...)", or how few were scored). ``time_accuracy`` is the shipped model's
measured error on that regime's held-out runs (None without any). Each ``per_gpu``
row carries its ``warnings`` (e.g. the CPU cores real JPEGs would need).

``workload.batch_size`` is the micro-batch of each GPU; ``effective_batch_size`` the samples of one optimizer step
(``Workload.effective_batch_size``: × ``grad_accum_steps`` × ``num_gpus``, every sharding being data-parallel), the
figure recommend's options keep; None in serving, which has no optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwise.catalog.model import Offer
from gpuwise.plan.errors import PlanError
from gpuwise.plan.offers import cheapest_offer, clusters_refused, node_size, ranking_currency
from gpuwise.plan.profile import WorkloadModel, cannot_run, estimate_fit, largest_fitting_batch, model_for, workload_on
from gpuwise.plan.recommend import JobSize, counts_words   # recommend's words for counts
from gpuwise.plan.remedies import changes_that_fit
from gpuwise.plan.accuracy import likely_step_time_range_s, load_accuracy, no_range_note, regime_of
from gpuwise.workload.precision import runs_on, why_not_on


def job_time(step_time_s: float, workload, job: JobSize | None) -> dict | None:
    if job is None:
        return None
    steps = job.optimizer_steps(workload.effective_batch_size)
    per_epoch = job.steps_per_epoch(workload.effective_batch_size)
    epoch_s = step_time_s * per_epoch if per_epoch is not None else None
    return {"optimizer_steps": steps, "epoch_time_s": epoch_s, "total_time_s": steps * step_time_s}


def _timed(e, method: str) -> dict:
    """Step time, throughput and bound of one GPU's estimate; none where the job cannot run there."""
    t = None if cannot_run(e.workload, e.gpu) else e.time
    likely = likely_step_time_range_s(t.step_time_s, method=method, bound=t.bound, calibrated=bool(e.calibration),
                                      regime=t.regime) if t else None
    return {"step_time_s": t.step_time_s if t else None, "samples_per_s": t.samples_per_s if t else None,
            "bound": t.bound if t else None, "warnings": list(t.warnings) if t else [],
            "likely_step_time_range_s": list(likely) if likely else None,
            "regime": regime_of(method, t.regime) if t else None}


def _row(e, headroom_fraction: float, method: str) -> dict:
    """One GPU's row of ``per_gpu``: its memory, the one fit verdict and spare memory, its step time."""
    fit = estimate_fit(e, headroom_fraction)
    return {"gpu": e.gpu.id, "memory_bytes": e.gpu.visible_memory_bytes, "peak_total_bytes": e.memory.total_upper_bytes,
            "fits": fit.fits, "spare_bytes": fit.spare_bytes,
            "cannot_run": cannot_run(e.workload, e.gpu), "calibration": e.calibration,
            "calibration_carried_from": e.calibration_carried_from,
            "precision": e.workload.precision, **_timed(e, method)}


def unrented_count_note(offers: list[Offer], gpu, count: int, provider: str) -> str | None:
    """Why none of ``provider``'s ``offers`` rents ``count`` of ``gpu`` together, by the rule recommend prices by
    (``plan.offers.cheapest_offer``: a cloud's instance shapes, a marketplace's GPUs one by one, whole machines as a
    cluster): the counts its offers have; None where one does (on-demand or spot)."""
    mine = [o for o in offers if o.gpu_id == gpu.id]
    if cheapest_offer(mine, gpu, count, ranking_currency(mine)) is not None:
        return None
    if not mine:
        return f"{provider} has no offer of {gpu.id} in the catalog, of {count} or any other count"
    clusters = clusters_refused(provider) if count > node_size(gpu, provider) else None
    return (f"{provider} has no offer of {count} {gpu.id}: it rents {counts_words(o.count for o in mine)} at a time"
            + (f" ({clusters})" if clusters else ""))


def refuse_if_cannot_run(workload, gpu) -> None:
    """PlanError where ``workload`` cannot run on ``gpu``, the one GPU the user asked about (``cannot_run``,
    the rule the other commands exclude by): a precision it lacks names the precisions it runs."""
    why = cannot_run(workload, gpu)
    if not why:
        return
    if why_not_on(workload_on(workload, gpu).precision, gpu.has_bf16, gpu.arch):
        raise PlanError(f"--precision {workload.precision}: {gpu.id} cannot run it: {why} "
                        f"(it runs {', '.join(runs_on(gpu))})")
    raise PlanError(f"{gpu.id} cannot run this job: {why}")


def estimate_answer(
    model: WorkloadModel, gpus: list, *, headroom_fraction: float, job: JobSize | None = None,
    suggest_changes: bool = True, progress: Callable[[str], None] | None = None, provider: str | None = None,
) -> tuple[dict, object]:
    """(the JSON answer, the main Estimate). ``gpus``: none (memory only), one, or several (a row each).
    ``provider``: whose machines the GPUs are in, which sets their links (None: each GPU's usual machine,
    machines linked by the assumed fallback network)."""
    count = model.workload.num_gpus
    refused = model.count_refusal(count)    # the rule recommend leaves such counts out by
    if refused:
        raise PlanError(f"--num-gpus {count}: {refused}")
    gpu = gpus[0] if len(gpus) == 1 else None
    if gpu is not None:
        refuse_if_cannot_run(model.workload, gpu)
    est = model.estimate(gpu, count=count, provider=provider)
    trace_info = None
    if model.method == "traced":
        t = model.trace()
        trace_info = {"ops": len(t.ops), "flops": t.flops, "param_count": t.param_count,
                      "trainable_param_count": t.trainable_param_count, "trace_time_s": t.trace_time_s,
                      "notes": list(t.notes)}
    time = None
    why_not = cannot_run(est.workload, gpu) if gpu is not None else None
    accuracy = load_accuracy(regime_of(model.method, None))    # the LLM regime for the closed form
    if est.time is not None and not why_not:
        time = est.time.to_dict()
        time.update(job_time(est.time.step_time_s, est.workload, job) or {})
        regime = regime_of(model.method, est.time.regime)
        likely = likely_step_time_range_s(est.time.step_time_s, method=model.method, bound=est.time.bound,
                                          calibrated=bool(est.calibration), regime=regime)
        time["regime"] = regime
        time["likely_step_time_range_s"] = list(likely) if likely else None
        time["likely_range_note"] = no_range_note(model.method, regime, bound=est.time.bound,
                                                  calibrated=bool(est.calibration))
        accuracy = load_accuracy(regime)
    inference = est.inference.to_dict() if est.inference is not None else None
    fit = estimate_fit(est, headroom_fraction) if gpu else None
    changes: tuple = ()
    if fit is not None and not fit.fits and suggest_changes and not why_not:
        changes = changes_that_fit(workload_on(model.workload, gpu), gpu, headroom_fraction=headroom_fraction,
                                   closed_form=model.method == "closed-form", progress=progress, provider=provider,
                                   correction=model.correction)
    per_gpu = [model.estimate(g, count=count, provider=provider) for g in gpus] if len(gpus) > 1 else []
    answer = {
        "workload": est.workload.to_dict(),
        # samples per optimizer step: the micro-batch × accumulation × data-parallel GPUs (None: serving steps none)
        "effective_batch_size": est.workload.effective_batch_size if est.workload.is_training else None,
        "method": model.method,
        "calibration": est.calibration,
        "calibration_carried_from": est.calibration_carried_from,
        "time_accuracy": accuracy.to_dict() if accuracy is not None else None,
        "memory": est.memory.to_dict(),
        # host RAM: what --offload keeps there (all GPUs together), what a paged optimizer may move there
        "cpu_offload_bytes": est.cpu_offload_bytes,
        "spillable_bytes": est.spillable_bytes,
        "time": time,
        "gpu": gpu.id if gpu else None,
        "provider": provider,
        "headroom_fraction": headroom_fraction,
        "fits": fit.fits if fit else None,
        "cannot_run": why_not,
        "spare_bytes": fit.spare_bytes if fit else None,
        "fit_summary": fit.summary if fit else None,
        # the model's own largest batch where it gives one (a decoder LLM serving: inference.max_batch_size, the
        # same figure); --max-batch sets it by its search (largest_batch_answer)
        "max_batch_size": (inference or {}).get("max_batch_size"),
        "changes_that_fit": list(changes),
        "inference": inference,
        "trace": trace_info,
        "per_gpu": [_row(e, headroom_fraction, model.method) for e in per_gpu],
    }
    return answer, est


def largest_batch_answer(
    model: WorkloadModel, gpu, *, headroom_fraction: float, job: JobSize | None = None,
    progress: Callable[[str], None] | None = None, provider: str | None = None,
    model_factory: Callable[..., WorkloadModel] = model_for,
) -> tuple[dict, object]:
    """``estimate --max-batch``: the answer at the largest micro-batch that fits ``gpu`` (its memory, step
    and job time), with ``max_batch_size`` and ``requested_batch_size``. Where not even batch 1 fits, the
    answer at the requested batch, with the changes that would make it fit."""
    refuse_if_cannot_run(model.workload, gpu)
    # one GPU asked about: every batch size, not only powers of two (a few more traces)
    largest = largest_fitting_batch(model, gpu, count=model.workload.num_gpus, headroom_fraction=headroom_fraction,
                                    provider=provider, powers_of_two=False)
    requested = model.workload.batch_size
    if largest and largest != requested:
        model = model_factory(model.workload.with_(batch_size=largest), progress, correction=model.correction)
    out, est = estimate_answer(model, [gpu], headroom_fraction=headroom_fraction, job=job, suggest_changes=not largest,
                               progress=progress, provider=provider)
    out.update(max_batch_size=largest, requested_batch_size=requested)
    return out, est
