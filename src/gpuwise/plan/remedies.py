"""When the job does not fit on the cheap GPUs: which change would make it fit, and what that costs.

Each remedy is a changed workload (gradient checkpointing, AMP, an 8-bit optimizer, a smaller
micro-batch with gradient accumulation, LoRA for LLMs); it is estimated on the GPUs that were
excluded for memory and are cheaper than the best option. One trace per remedy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.catalog.model import Catalog
from gpuwise.plan.fit import fits
from gpuwise.plan.profile import model_for
from gpuwise.plan.quote import make_quote
from gpuwise.plan.recommend import Constraints, JobSize, Recommendation, apply_constraints
from gpuwise.workload import Workload


@dataclass(frozen=True)
class Remedy:
    change: str              # what to change, as the user would type it
    workload: Workload


def candidate_remedies(w: Workload, closed_form: bool) -> list[Remedy]:
    out = []
    if not w.is_training:
        return out
    if w.precision in ("fp32", "tf32"):
        out.append(Remedy("--precision amp-bf16", w.with_(precision="amp-bf16")))
        out.append(Remedy("--precision amp-fp16", w.with_(precision="amp-fp16")))
    if not w.grad_checkpointing:
        out.append(Remedy("--grad-checkpointing", w.with_(grad_checkpointing=True)))
    if w.optimizer in ("adam", "adamw"):
        out.append(Remedy("--optimizer adamw-8bit", w.with_(optimizer="adamw-8bit")))
    if w.batch_size > 1:
        half = w.batch_size // 2
        out.append(Remedy(f"--batch-size {half} --grad-accum {w.grad_accum_steps * 2}",
                          w.with_(batch_size=half, grad_accum_steps=w.grad_accum_steps * 2)))
    if closed_form and w.finetune == "full":
        out.append(Remedy("--finetune lora", w.with_(finetune="lora")))
        out.append(Remedy("--finetune qlora", w.with_(finetune="qlora")))
    return out


def find_remedies(
    rec: Recommendation, catalog: Catalog, job: JobSize, constraints: Constraints | None = None, *,
    progress: Callable[[str], None] | None = None, max_remedies: int = 4,
    model_factory: Callable[[Workload], object] | None = None,
) -> tuple[dict, ...]:
    """For the GPU × count options excluded for memory that are cheaper per hour than the best option,
    the changes that make the job fit there, quoted for the whole job. A remedy must meet the same
    constraints as any option (deadline, budget) and cost less than the best option as it is.
    ``model_factory``: workload -> workload model (default: ``model_for``, which traces)."""
    constraints = constraints or Constraints()
    oom = [o for o in rec.options if o.fits is False and o.peak_total_bytes is not None and o.count == 1]
    if rec.best is not None:
        oom = [o for o in oom if o.price_per_hour_ranked < rec.best.price_per_hour_ranked]
    if not oom:
        return ()
    oom.sort(key=lambda o: o.price_per_hour_ranked)
    gpus = {g.id: g for g in catalog.gpus}
    results = []
    for remedy in candidate_remedies(rec.workload, rec.method == "closed-form")[:max_remedies]:
        model = model_factory(remedy.workload) if model_factory else model_for(remedy.workload, progress)
        for target in oom:   # cheapest first: the cheapest GPU this remedy rescues is the news
            gpu = gpus[target.gpu]
            est = model.estimate(gpu, count=target.count)
            if est.time is None or not fits(est.memory.total_bytes, gpu, constraints.headroom_fraction):
                continue
            steps = job.optimizer_steps(remedy.workload.effective_batch_size)
            quote = make_quote(
                gpu, target.count, target.offer,
                peak_total_bytes=est.memory.total_bytes, step_time_s=est.time.step_time_s,
                headroom_fraction=constraints.headroom_fraction, ranking_currency=rec.ranking_currency,
                total_time_s=steps * est.time.step_time_s, batch_size=remedy.workload.batch_size,
                grad_accum_steps=remedy.workload.grad_accum_steps,
            )
            (quote,) = apply_constraints([quote], constraints, rec.ranking_currency)
            if not quote.eligible:
                continue
            results.append({"change": remedy.change, **quote.to_dict()})
            break
    if rec.best is not None:  # a remedy that costs more than the best option as it is, is no remedy
        results = [r for r in results if r["total_cost_ranked"] < rec.best.total_cost_ranked]
    results.sort(key=lambda r: r["total_cost_ranked"])
    return tuple(results)
