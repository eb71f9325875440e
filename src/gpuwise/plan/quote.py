"""The one quote row: a GPU × count from one offer, whether the job fits, how long a step takes, what it costs.

``recommend`` ranks quotes for a whole job; ``report`` and ``advise`` render quotes for the work a
measured run did or has left. Every field has its unit in its name; money is in the offer's own
currency, with ``*_ranked`` twins in the ranking currency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuwise.catalog.model import GPU, Offer
from gpuwise.plan.fit import fits as fits_rule
from gpuwise.plan.fit import spare_bytes
from gpuwise.plan.money import convert
from gpuwise.plan.reasons import Exclusion
from gpuwise.runtime.serving_load import load_fraction

if TYPE_CHECKING:
    from gpuwise.plan.profile import EstimateFit


@dataclass(frozen=True)
class Quote:
    """Renting ``count`` GPUs of one kind from one offer (``provider`` None: no offer, unpriced)."""

    gpu: str                              # canonical catalog id
    gpu_name: str
    count: int
    provider: str | None
    currency: str | None
    price_per_hour: float | None          # for all ``count`` GPUs, in ``currency``
    spot: bool
    gpu_memory_bytes: int                 # per GPU, as the driver reports it
    fits: bool | None                     # None: the need is unknown
    peak_total_bytes: int | None          # per GPU, what nvidia-smi would show at the peak (upper side of an estimate)
    spare_bytes: int | None               # usable memory left at the peak, after the headroom
    step_time_s: float | None             # one optimizer step (or the measured unit of work) on ``count`` GPUs
    ranking_currency: str | None = None
    price_per_hour_ranked: float | None = None
    # the machines the ``count`` GPUs run on (``Topology.nodes``): several where the count is more than one
    # machine of the GPU holds at the provider (16 H100s at AWS: 2 nodes of 8, priced as two of its 8-GPU machines)
    nodes: int = 1
    # Whole-job fields (recommend): batch layout, time and cost of the job, why an option lost.
    batch_size: int | None = None         # micro-batch per GPU
    grad_accum_steps: int = 1
    effective_batch_size: int | None = None   # samples per optimizer step (training; None when serving)
    steps: int | None = None              # the job's optimizer steps (serving: batches), each of step_time_s
    total_time_s: float | None = None     # for a spot offer: expected, preemptions included
    preemption_time_s: float | None = None  # spot: the expected time lost to preemptions (in total_time_s)
    total_cost: float | None = None       # in ``currency``
    total_cost_ranked: float | None = None
    bound: str | None = None
    regime: str | None = None             # the step's regime (runtime.accuracy.REGIMES): whose likely range applies
    # LLM serving: what one request sees on this option (None for training and for traced models)
    ttft_s: float | None = None           # time to first token: the batch's prefill
    tpot_s: float | None = None           # time per output token: one decode step at the mean context
    # LLM serving at a load (--request-rate; None otherwise): the fewest replicas of ``count`` GPUs that carry it
    # (and meet --ttft/--tpot); ttft_s and tpot_s are then the loaded figures, the job one hour of serving
    request_rate_per_s: float | None = None
    replicas: int | None = None
    concurrency: float | None = None      # requests in flight over all replicas (Little's law)
    utilisation: float | None = None      # share of time each replica's GPUs work (busy; ``load`` is rate / capacity)
    capacity_per_replica_per_s: float | None = None   # the largest rate one replica carries
    cost_per_hour_at_load: float | None = None        # replicas × price_per_hour, in ``currency``
    cost_per_million_tokens: float | None = None      # at that load, in ``currency``
    cpu_offload_bytes: int = 0            # --offload: host RAM the offloaded state takes, all GPUs together
    why_faster: str | None = None         # a remedy faster than the job as it is: why (plan.remedies)
    exclusion: Exclusion | None = None      # why it is left out (plan/reasons.py); None: eligible
    warnings: tuple[str, ...] = ()
    calibration: str | None = None        # the user's calibration that moved this option's estimate, in words
    offer_source: str | None = None
    offer: Offer | None = field(default=None, compare=False, repr=False)   # what was priced (not in JSON)

    @property
    def own_price(self) -> bool:
        """Priced by the user's own offer (a user catalog's), not a shipped indicative one."""
        return self.offer is not None and self.offer.own

    @property
    def excluded_because(self) -> str | None:
        """The exclusion in words (None: eligible)."""
        return self.exclusion.text if self.exclusion is not None else None

    @property
    def gpus_per_node(self) -> int:
        """GPUs on each of the ``nodes`` machines (the launch's ``num_nodes`` × this)."""
        return self.count // self.nodes

    @property
    def eligible(self) -> bool:
        return self.exclusion is None

    @property
    def cost_per_step_ranked(self) -> float | None:
        """Money per step in the ranking currency, what comparisons use (None without a price or step time)."""
        if self.price_per_hour_ranked is None or self.step_time_s is None:
            return None
        return self.price_per_hour_ranked * self.step_time_s / 3600.0

    @property
    def load(self) -> float | None:
        """At a load: the rate each replica carries as a share of its capacity (``serving_load.load_fraction``)."""
        if not (self.request_rate_per_s and self.replicas and self.capacity_per_replica_per_s):
            return None
        return load_fraction(self.request_rate_per_s, self.replicas, self.capacity_per_replica_per_s)

    @property
    def cost_per_million_tokens_ranked(self) -> float | None:
        """At a load: the cost per million output tokens in the ranking currency (what the table shows)."""
        if self.cost_per_million_tokens is None or self.total_cost_ranked is None or not self.cost_per_hour_at_load:
            return None
        return self.cost_per_million_tokens * self.total_cost_ranked / self.cost_per_hour_at_load

    def hours_for(self, steps: float) -> float:
        return steps * (self.step_time_s or 0.0) / 3600.0

    def ranked_cost_for(self, steps: float) -> float:
        """Money for ``steps`` steps in the ranking currency."""
        return steps * (self.cost_per_step_ranked or 0.0)

    def to_dict(self) -> dict:
        return {
            "gpu": self.gpu, "gpu_name": self.gpu_name, "count": self.count, "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node, "provider": self.provider,
            "currency": self.currency, "price_per_hour": self.price_per_hour, "spot": self.spot,
            "ranking_currency": self.ranking_currency, "price_per_hour_ranked": self.price_per_hour_ranked,
            "gpu_memory_bytes": self.gpu_memory_bytes, "fits": self.fits, "peak_total_bytes": self.peak_total_bytes,
            "spare_bytes": self.spare_bytes, "step_time_s": self.step_time_s,
            "cost_per_step_ranked": self.cost_per_step_ranked,
            "batch_size": self.batch_size, "grad_accum_steps": self.grad_accum_steps,
            "effective_batch_size": self.effective_batch_size, "steps": self.steps, "total_time_s": self.total_time_s,
            "preemption_time_s": self.preemption_time_s,
            "total_cost": self.total_cost, "total_cost_ranked": self.total_cost_ranked, "bound": self.bound,
            "regime": self.regime, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
            "request_rate_per_s": self.request_rate_per_s, "replicas": self.replicas,
            "concurrency": self.concurrency, "load": self.load, "utilisation": self.utilisation,
            "capacity_per_replica_per_s": self.capacity_per_replica_per_s,
            "cost_per_hour_at_load": self.cost_per_hour_at_load,
            "cost_per_million_tokens": self.cost_per_million_tokens,
            "cpu_offload_bytes": self.cpu_offload_bytes, "why_faster": self.why_faster,
            "excluded_because": self.excluded_because,
            "excluded_kind": self.exclusion.kind if self.exclusion is not None else None,
            "excluded_kinds": list(self.exclusion.kinds) if self.exclusion is not None else [],
            "warnings": list(self.warnings),
            "calibration": self.calibration, "offer_source": self.offer_source, "own_price": self.own_price,
            "offer_checked": self.offer.checked if self.offer is not None else None,   # the day its price was seen
            "offer_region": (self.offer.region or None) if self.offer is not None else None,   # where it holds
        }


def make_quote(
    gpu: GPU, count: int, offer: Offer | None, *, peak_total_bytes: int | None, step_time_s: float | None,
    headroom_fraction: float, ranking_currency: str | None, fit: EstimateFit | None = None, **job,
) -> Quote:
    """A quote with the fit decided by the one rule and the price in the ranking currency. ``fit``: the
    estimate's own verdict and spare memory where it has one (``plan.profile.estimate_fit``: vLLM's
    reservation when it serves); None: the peak against the usable memory.

    ``job``: the whole-job fields of :class:`Quote` (``total_time_s`` …); ``total_cost`` is derived
    from ``total_time_s`` and the offer when not given.
    """
    if fit is not None:
        fits, spare = fit.fits, fit.spare_bytes
    elif peak_total_bytes is not None:
        fits, spare = fits_rule(peak_total_bytes, gpu, headroom_fraction), spare_bytes(peak_total_bytes, gpu,
                                                                                        headroom_fraction)
    else:
        fits = spare = None
    price = offer.price_per_hour if offer else None
    currency = offer.currency if offer else None
    ranked = _ranked(price, currency, ranking_currency)
    total_time_s = job.get("total_time_s")
    if "total_cost" not in job and total_time_s is not None and price is not None:
        job["total_cost"] = total_time_s / 3600.0 * price
    if job.get("total_cost") is not None:
        job["total_cost_ranked"] = _ranked(job["total_cost"], currency, ranking_currency)
    return Quote(
        gpu=gpu.id, gpu_name=gpu.name, count=count, provider=offer.provider if offer else None,
        currency=currency, price_per_hour=price, spot=bool(offer and offer.spot),
        gpu_memory_bytes=gpu.visible_memory_bytes, fits=fits, peak_total_bytes=peak_total_bytes, spare_bytes=spare,
        step_time_s=step_time_s, ranking_currency=ranking_currency, price_per_hour_ranked=ranked,
        offer_source=offer.source if offer else None, offer=offer, **job,
    )


def _ranked(amount: float | None, currency: str | None, ranking_currency: str | None) -> float | None:
    if amount is None or currency is None or ranking_currency is None:
        return None
    return convert(amount, currency, ranking_currency)
