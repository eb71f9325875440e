"""When the job does not fit on the cheap GPUs: which change would make it fit, and what that costs.

Each remedy is a changed workload (gradient checkpointing, AMP, an 8-bit optimizer, a smaller
micro-batch with gradient accumulation, LoRA for LLMs); it is estimated on the GPUs that were
excluded for memory and are cheaper than the best option. One trace per remedy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.catalog.model import Catalog
from gpuwise.plan.money import convert
from gpuwise.plan.profile import fits, model_for
from gpuwise.plan.recommend import JobSize, Recommendation
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
    rec: Recommendation, catalog: Catalog, job: JobSize, *, headroom_fraction: float = 0.05,
    progress: Callable[[str], None] | None = None, max_remedies: int = 4,
) -> tuple[dict, ...]:
    """For the cheapest GPUs excluded for memory (cheaper per hour than the best option), the changes
    that would make the job fit there, with the new peak, time and cost."""
    oom = [o for o in rec.options if not o.fits and o.peak_total_bytes is not None and o.count == 1]
    if rec.best is not None:
        best_hourly = convert(rec.best.price_per_hour, rec.best.currency, rec.ranking_currency)
        oom = [o for o in oom if convert(o.price_per_hour, o.currency, rec.ranking_currency) < best_hourly]
    if not oom:
        return ()
    oom.sort(key=lambda o: convert(o.price_per_hour, o.currency, rec.ranking_currency))
    targets = oom  # memory per GPU is cheap once the remedy is traced: try them all, cheapest first
    gpus = {g.id: g for g in catalog.gpus}
    results = []
    for remedy in candidate_remedies(rec.workload, rec.method == "closed-form")[:max_remedies]:
        model = model_for(remedy.workload, progress)
        for target in targets:
            gpu = gpus[target.gpu]
            est = model.estimate(gpu, count=1)
            if not fits(est, headroom_fraction) or est.time is None:
                continue
            steps = job.optimizer_steps(remedy.workload.effective_batch_size)
            total_time_s = steps * est.time.step_time_s
            results.append({
                "change": remedy.change, "gpu": gpu.id, "gpu_name": gpu.name,
                "peak_total_bytes": est.memory.total_bytes, "gpu_memory_bytes": gpu.visible_memory_bytes,
                "step_time_s": est.time.step_time_s, "total_time_s": total_time_s,
                "total_cost": total_time_s / 3600 * target.price_per_hour, "currency": target.currency,
                "provider": target.provider,
            })
            break  # the cheapest GPU this remedy rescues is the news
    if rec.best is not None:  # a remedy that costs more than the best option as it is, is no remedy
        best_cost = rec.best.ranking_cost
        results = [r for r in results if convert(r["total_cost"], r["currency"], rec.ranking_currency) < best_cost]
    results.sort(key=lambda r: convert(r["total_cost"], r["currency"], rec.ranking_currency))
    return tuple(results)
