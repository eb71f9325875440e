"""What the rest of a run would take on other GPUs: step time there, price, cost per step.

The step time on another GPU comes from one swappable function (``StepTimeScaler``). The default is
a roofline ratio: a step spends ``compute_share`` of its time bound by peak math for the precision and
the rest bound by memory bandwidth, so ``t_to = t_from · (share·peak_from/peak_to + (1−share)·bw_from/bw_to)``.
When the workload is known, ``predicted_scaler`` scales by the time predictor's step times instead
(the ratio of its predictions); nothing else here changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.catalog.model import GPU, Catalog, Offer

StepTimeScaler = Callable[[GPU, GPU, float], float]  # (gpu the run is on, other gpu, step_time_s there) -> s

# workload precision (DESIGN.md names) -> the catalog's peak_tflops key
_PEAK_KEY = {"fp32": "fp32", "tf32": "tf32", "amp-fp16": "fp16", "amp-bf16": "bf16", "fp16": "fp16", "bf16": "bf16"}
_FALLBACK = {"bf16": "fp16", "tf32": "fp32", "fp16": "fp32"}  # what PyTorch runs where the GPU lacks one


def peak_tflops(gpu: GPU, precision: str) -> float:
    key = _PEAK_KEY.get(precision, precision)
    while gpu.peak(key) is None and key in _FALLBACK:
        key = _FALLBACK[key]
    value = gpu.peak(key)
    return float(value) if value else float(gpu.peak("fp32") or 1.0)


def roofline_scaler(precision: str = "amp-fp16", compute_share: float = 0.5) -> StepTimeScaler:
    """The default scaler (see the module docstring). ``compute_share`` in [0, 1]."""
    if not 0.0 <= compute_share <= 1.0:
        raise ValueError(f"compute_share must be in [0, 1], got {compute_share}")

    def scale(gpu_from: GPU, gpu_to: GPU, step_time_s: float) -> float:
        compute = peak_tflops(gpu_from, precision) / peak_tflops(gpu_to, precision)
        memory = gpu_from.memory_bandwidth_gbs / gpu_to.memory_bandwidth_gbs
        return step_time_s * (compute_share * compute + (1.0 - compute_share) * memory)

    return scale


def predicted_scaler(step_time_s: Callable[[GPU], "float | None"]) -> StepTimeScaler:
    """A scaler from the time predictor's step times of the run's workload (``gpuwise.plan.
    step_time_function``): the measured step time × predicted(to) / predicted(from)."""

    def scale(gpu_from: GPU, gpu_to: GPU, measured_step_time_s: float) -> float:
        t_from, t_to = step_time_s(gpu_from), step_time_s(gpu_to)
        if not t_from or t_to is None:
            return math.inf  # cannot run there (e.g. amp-bf16 on a GPU without bf16)
        return measured_step_time_s * t_to / t_from

    return scale


@dataclass(frozen=True)
class GpuOption:
    """Renting ``count`` of ``gpu_id`` from ``provider`` for the rest of the run.

    ``fits_memory``: None when the run's peak memory is unknown."""

    gpu_id: str
    gpu_name: str
    count: int
    provider: str
    price_per_hour: float
    currency: str
    step_time_s: float
    fits_memory: bool | None
    memory_bytes: int
    is_current: bool = False

    @property
    def cost_per_step(self) -> float:
        return self.price_per_hour * self.step_time_s / 3600.0

    def hours_for(self, steps: float) -> float:
        return steps * self.step_time_s / 3600.0

    def cost_for(self, steps: float) -> float:
        return steps * self.cost_per_step

    def to_dict(self) -> dict:
        return {"gpu": self.gpu_id, "count": self.count, "provider": self.provider,
                "price_per_hour": self.price_per_hour, "currency": self.currency,
                "step_time_s": round(self.step_time_s, 6), "cost_per_step": round(self.cost_per_step, 8),
                "fits_memory": self.fits_memory, "is_current": self.is_current}


def cheapest_offer(catalog: Catalog, gpu_id: str, count: int, *, provider: str | None, currency: str | None) -> Offer | None:
    """The cheapest offer for ``count`` GPUs: an offer of exactly ``count`` or single-GPU offers × count."""
    best = None
    for o in catalog.offers:
        if o.gpu_id != gpu_id or (provider and o.provider.lower() != provider.lower()):
            continue
        if currency and o.currency != currency:
            continue
        if o.count not in (1, count):
            continue
        price = o.price_per_gpu_hour * count
        if best is None or price < best[0]:
            best = (price, o)
    if best is None:
        return None
    price, o = best
    return Offer(provider=o.provider, gpu_id=o.gpu_id, count=count, price_per_hour=price, currency=o.currency,
                 spot=o.spot, source=o.source, checked=o.checked, indicative=o.indicative)


def gpu_options(catalog: Catalog, current: GPU, step_time_s: float, *, count: int = 1,
                scaler: StepTimeScaler, provider: str | None = None, currency: str | None = None,
                memory_need_bytes: int | None = None, current_price_per_hour: float | None = None) -> list[GpuOption]:
    """Every GPU with an offer (same count, provider and currency), cheapest per step first.

    The current GPU is included (``is_current``) with ``current_price_per_hour`` when given, else its
    cheapest offer. Spot and on-demand offers compete alike: a spot offer's source says it is one.
    """
    options = []
    for gpu in catalog.gpus:
        is_current = gpu.id == current.id
        if is_current and current_price_per_hour is not None:
            offer_provider, price, cur = provider or "(yours)", current_price_per_hour, currency
        else:
            offer = cheapest_offer(catalog, gpu.id, count, provider=provider, currency=currency)
            if offer is None:
                continue
            offer_provider, price, cur = offer.provider, offer.price_per_hour, offer.currency
        t = step_time_s if is_current else scaler(current, gpu, step_time_s)
        if not math.isfinite(t):
            continue  # the workload cannot run there
        fits = None if memory_need_bytes is None else gpu.memory_bytes >= memory_need_bytes
        options.append(GpuOption(gpu.id, gpu.name, count, offer_provider, price, cur or "", t, fits,
                                 gpu.memory_bytes, is_current))
    return sorted(options, key=lambda o: (o.cost_per_step, o.step_time_s))
