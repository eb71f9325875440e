"""LLM serving at a request rate: what one deployment does under a stream of requests, and how many replicas
a rate needs. Pure queueing arithmetic over the one prefill and decode model (``gpuwise.runtime.llm``), whose
figures at a few batch sizes arrive as a ``ServingCurve`` (``gpuwise.plan.llm.serving_curve`` builds it).

Requests arrive as a Poisson stream of λ a second (many independent users: what vLLM's
``benchmarks/benchmark_serving.py --request-rate`` sends and what Vidur (Agrawal et al., MLSys 2024) sizes
deployments against), each with the same P prompt tokens and N new tokens. Write p for the prefill of one
prompt, d(b) for one decode iteration (one token for each of b sequences, at the mean context P + N/2), both
from the decode and prefill model, and B for the most sequences one replica holds at once.

Continuous batching (``--engine vllm``: iteration-level scheduling, Orca, OSDI 2022; PagedAttention, SOSP
2023; chunked prefill on by default in vLLM V1, Sarathi-Serve, OSDI 2024), derived step by step:

1. GPU time per request: its prefill p, and N tokens in iterations that each serve b sequences, d(b)/b of GPU
   time a token. Utilisation (the share of time the GPU works): ρ = λ (p + N d(b) / b).
2. The decode batch: a request joins the running batch at the next iteration and nobody waits for a decode
   slot while the KV cache has room, so decoding is an infinite-server stage (M/G/∞). A request decodes beside
   a Poisson number of others whose mean is, by Little's law on that stage, λ N TPOT: b = 1 + λ N TPOT.
3. The prefill share: arriving prompts take λ p of every second of GPU time, and chunked prefill interleaves
   them with the iterations, so a decoding request gets its next token every TPOT = d(b) / (1 − λ p).
4. The fixed point of 2 and 3, b = 1 + λ N d(b) / (1 − λ p), solved for the rate: the batch is b at
   λ(b) = (b − 1) / (N d(b) + (b − 1) p). The operating point is the smallest b with λ(b) = λ (the batch grows
   to it from empty): ``scipy.optimize.brentq`` between the two knots of the curve that bracket λ. There
   ρ = λ p + (1 − λ p)(b − 1)/b, below 1.
5. Capacity: B (the KV cache at the mean context, and vLLM's ``max_num_seqs``) is a hard limit on the
   sequences decoding at once, and b is only their mean. Their number is random: the M/G/∞ stage of 2 holds a
   Poisson number of them, mean b − 1 beside the arriving request, standard deviation √(b − 1). A replica
   run at a mean of b = B would find its cache full about half the time (vLLM queues the arrivals and
   preempts running sequences), so the mean batch is kept to the largest b_q whose
   ``CONCURRENCY_QUANTILE`` (99%) quantile fits: an arriving request finds a free slot, 1 + Poisson(b − 1)
   <= B, with probability ``CONCURRENCY_QUANTILE`` (``scipy.special.pdtri`` inverts the Poisson CDF for its
   mean). Capacity is the largest λ(b) for b up to b_q; past it one deployment does not carry the rate.
   (A replica with room for one sequence serves one request after another: the static batch of 1 below.)
6. Time to first token: one prefill plus the wait for the prefill slot, M/D/1: every prompt has the same P
   tokens, so its service time is constant (Pollaczek-Khinchine with no variance); M/M/1 would assume
   exponentially varied prompts and double the wait. W = λ p² / (2 (1 − λ p)), plus the rest of the step in
   progress, ρ d(b) / 2. TTFT = p + W.
7. Requests in flight (concurrency, Little's law): C = λ (TTFT + N TPOT).

At a vanishing rate b → 1, TPOT → d(1), TTFT → p and ρ → 0. Not modelled (so on the safe side): several
prompts' prefills batched into one step, decode tokens riding free in a prefill's step (Sarathi's
piggybacking), preemption and recompute, prefix caching, and prompts or answers of varied length.

Static batches (``--engine hf``: ``model.generate`` on a fixed batch; a request cannot join one that runs).
Kept simple: T(b) = ttft(b) + N d(b) takes a batch of b from its prefill to its last token; when a batch
ends the server takes up to B waiting requests, so a request shares its batch with those that arrived
during one batch, b = min(B, 1 + λ T(b)) (below B: λ(b) = (b − 1) / T(b), solved as above); capacity
B / T(B). The server is idle only after a batch during which nobody arrived (probability e^(−λT)), until the
next arrival (1/λ on average), so a batch holds λT + e^(−λT) requests on average and the GPU is busy
ρ = λT / (λT + e^(−λT)) of the time, and never less than full batches keep it, ρ_B = λ T(B) / B (B = 1: an
M/D/1 queue, busy λT). A request arriving while a batch runs (probability ρ, Poisson arrivals
see time averages) waits out the rest of it, T(b) / 2 for a batch of fixed length, and joins the next: every
request that waits joins the next batch while it is not full. Near capacity the batches are full and the
requests beyond B wait for a later one: the requests queued ahead of a slot, M/D/1's
ρ_B² / (2 (1 − ρ_B)) over slots of T(B) / B each, ρ_B² T(B) / (2 B (1 − ρ_B)) (with B = 1 the whole wait is
then M/D/1's, ρ T / (2 (1 − ρ))). W = ρ T(b) / 2 + that; TTFT = W + ttft(b), TPOT = d(b).
(The earlier M/D/1 with the whole batch as one service, ρ T(b) / (2 (1 − ρ)) with ρ = λ T(b) / b, is λ T(b)² / 2:
10-20× what a simulation of the static batches shows, whose TTFT this formula meets within 15%:
tests/runtime/test_static_batch_wait.py.)

Replicas: r identical deployments behind a load balancer share the stream, λ / r each (a split Poisson
stream is Poisson). The smallest r that carries the rate, or, with latency targets, the smallest that also
meets them (the loaded TTFT and TPOT fall as r grows, towards their vanishing-rate limits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gpuwise.runtime.model import RuntimeError_

MAX_REPLICAS = 1 << 16     # a search bound, far past any rental
CONCURRENCY_QUANTILE = 0.99
"""Continuous batching: the share of time an arriving request must find a free slot among the B sequences one
replica holds. The sequences decoding at once are a Poisson number (M/G/∞), so sizing on their mean runs a
replica whose mean is near B with a full KV cache much of the time (at a mean of 40 beside a limit of 41,
about 40% of the time), where vLLM queues new requests and preempts running ones: their latency is then
not what the queueing here says. Sizing on the 99th percentile keeps that to one request in a hundred."""


@dataclass(frozen=True)
class ServingCurve:
    """One replica's figures at a few batch sizes (``batches``, from 1 to ``max_batch``); between them the
    figures are linear in the batch (decode is close to affine in it)."""

    engine: str                          # "vllm": continuous batching; "hf": static batches
    new_tokens: int                      # N: tokens an answer
    batches: tuple[int, ...]             # knots, ascending, first 1, last max_batch
    first_token_s: tuple[float, ...]     # vllm: one prompt's prefill (the same at every knot); hf: the batch's
    decode_step_s: tuple[float, ...]     # one decode iteration at each knot
    max_batch: int                       # B: most sequences at once
    batch_limit: str = ""                # what sets B, in words

    def __post_init__(self) -> None:
        if self.engine not in ("vllm", "hf"):
            raise RuntimeError_(f"engine must be vllm or hf, got {self.engine!r}")
        if self.new_tokens < 1 or self.max_batch < 1:
            raise RuntimeError_("a serving curve needs N >= 1 new tokens and room for one sequence")
        n = len(self.batches)
        if not (n == len(self.first_token_s) == len(self.decode_step_s)) or self.batches[0] != 1 \
                or self.batches[-1] != self.max_batch or list(self.batches) != sorted(set(self.batches)):
            raise RuntimeError_("knots must ascend from 1 to max_batch, one figure each")

    @property
    def continuous(self) -> bool:
        """Continuous batching; a replica that holds one sequence serves one request after another, which is
        a static batch of 1."""
        return self.engine == "vllm" and self.max_batch > 1

    def decode_at(self, batch: float) -> float:
        return float(np.interp(batch, self.batches, self.decode_step_s))

    def first_token_at(self, batch: float) -> float:
        return float(np.interp(batch, self.batches, self.first_token_s))

    def batch_time_at(self, batch: float) -> float:
        """A static batch from its prefill to its last token, T(b)."""
        return self.first_token_at(batch) + self.new_tokens * self.decode_at(batch)

    @property
    def batch_at_quantile_limit(self) -> float:
        """The largest mean decode batch b (as a request sees it) one replica may run at: B for static batches
        (a full batch waits, nothing is preempted); under continuous batching the b whose
        ``CONCURRENCY_QUANTILE`` quantile of the sequences decoding at once, 1 + Poisson(b − 1), is B."""
        if not self.continuous:
            return float(self.max_batch)
        others = mean_within(self.max_batch - 1, CONCURRENCY_QUANTILE)
        top = 1.0 + others
        while top > 1.0 and top - 1.0 > others:     # 1 + m rounds up a half float: keep (b - 1) within m
            top = float(np.nextafter(top, 0.0))
        return min(float(self.max_batch), top)

    def rate_at_batch(self, batch: float) -> float:
        """λ(b): the request rate at which the mean batch is ``batch`` (below B for static batches)."""
        if self.continuous:
            return (batch - 1.0) / (self.new_tokens * self.decode_at(batch) + (batch - 1.0) * self.first_token_at(1))
        return (batch - 1.0) / self.batch_time_at(batch)


def mean_within(limit: int, quantile: float) -> float:
    """The largest mean of a Poisson count that stays at or below ``limit`` with probability ``quantile``.
    ``pdtri`` inverts the CDF only to rounding: where its mean comes out a hair high, ``pdtr(limit, mean)`` falls
    just short of ``quantile`` and ``poisson_quantile`` of it is ``limit + 1`` (48 of the limits 0..598 did), so
    the mean is stepped down, one float at a time, until the CDF says ``quantile`` again (by the same ``pdtr``
    test ``poisson_quantile`` makes)."""
    from scipy.special import pdtr, pdtri   # the Poisson CDF and its inverse in the mean; loaded with a rate only

    if limit < 0:
        return 0.0
    mean = float(pdtri(limit, quantile))
    while mean > 0.0 and pdtr(limit, mean) < quantile:
        mean = float(np.nextafter(mean, 0.0))
    return mean


def poisson_quantile(mean: float, quantile: float) -> int:
    """The smallest count k with P(Poisson(``mean``) <= k) >= ``quantile``."""
    from scipy.special import pdtr, pdtrik

    if mean <= 0:
        return 0
    k = max(0, math.ceil(float(pdtrik(quantile, mean))) - 1)
    while k > 0 and pdtr(k - 1, mean) >= quantile:
        k -= 1
    while pdtr(k, mean) < quantile:
        k += 1
    return k


def concurrency_rule() -> str:
    """The sizing assumption of continuous batching, in words (said with every load's figures)."""
    return (f"a replica is loaded so that the sequences decoding at once (a Poisson number) stay within its limit "
            f"{CONCURRENCY_QUANTILE:.0%} of the time, not only on average")


@dataclass(frozen=True)
class LoadPoint:
    """One replica at ``request_rate_per_s``; the figures are None where it does not carry the rate."""

    request_rate_per_s: float
    carried: bool
    decode_batch: float | None = None    # mean sequences per decode iteration, as a request sees it
    decode_batch_at_quantile: int | None = None   # continuous batching: that batch's CONCURRENCY_QUANTILE quantile
    concurrency: float | None = None     # requests in flight (Little's law)
    utilisation: float | None = None     # share of time the GPU works
    ttft_s: float | None = None
    tpot_s: float | None = None


def capacity_per_s(curve: ServingCurve) -> float:
    """The largest rate one replica carries (requests a second)."""
    if curve.continuous:   # λ(b) is monotone between knots (a ratio of linear terms): its largest is at a knot
        top = curve.batch_at_quantile_limit     # or at the mean batch the concurrency quantile allows
        return max([curve.rate_at_batch(b) for b in curve.batches if b <= top] + [curve.rate_at_batch(top)])
    return curve.max_batch / curve.batch_time_at(curve.max_batch)


def _operating_batch(curve: ServingCurve, rate: float) -> float:
    """The smallest b with λ(b) = ``rate`` (static batches: B where the batch is full)."""
    from scipy.optimize import brentq   # ~0.45 s to import: only a request-rate solve pays it, not every command

    top = curve.batch_at_quantile_limit
    previous = curve.batches[0]
    for knot in [k for k in curve.batches[1:] if k < top] + [top]:
        if curve.rate_at_batch(knot) >= rate:
            return brentq(lambda b: curve.rate_at_batch(b) - rate, previous, knot, xtol=1e-9)
        previous = knot
    return float(top)


def static_busy_share(arrivals_per_batch: float, full_load: float) -> float:
    """Static batches: the share of time the GPU works when λT requests arrive during one batch. It idles
    only after a batch during which nobody arrived (e^(−λT)) until the next arrival, so a batch holds
    λT + e^(−λT) requests on average and the busy share is λT over that; never less than ``full_load``, the
    share full batches of B keep it busy (all of it for B = 1: one request after another)."""
    return max(full_load, arrivals_per_batch / (arrivals_per_batch + math.exp(-arrivals_per_batch)))


def static_full_batch_load(curve: ServingCurve, rate_per_s: float) -> float:
    """Static batches: the rate as a share of what full batches carry, λ T(B) / B (1: saturated)."""
    return rate_per_s * curve.batch_time_at(curve.max_batch) / curve.max_batch


def static_batch_wait_s(curve: ServingCurve, batch_s: float, busy_share: float, full_load: float) -> float:
    """Static batches: a request's wait before its batch starts. The rest of the batch in progress (found
    running with probability ``busy_share``; half of a batch of fixed length ``batch_s`` is left on
    average), and, as full batches near saturation, the requests queued ahead of a slot in a later one
    (M/D/1's queue at ``full_load``, ρ² / (2 (1 − ρ)), over slots of T(B) / B)."""
    slot_s = curve.batch_time_at(curve.max_batch) / curve.max_batch
    return busy_share * batch_s / 2.0 + full_load ** 2 * slot_s / (2.0 * (1.0 - full_load))


def load_point(curve: ServingCurve, rate_per_s: float) -> LoadPoint:
    """One replica under a Poisson stream of ``rate_per_s`` requests a second (the module's derivation)."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise RuntimeError_(f"a request rate must be positive, got {rate_per_s!r}")
    rate, n = rate_per_s, curve.new_tokens
    if rate > capacity_per_s(curve):
        return LoadPoint(rate, carried=False)
    b = _operating_batch(curve, rate)
    d = curve.decode_at(b)
    if curve.continuous:
        p = curve.first_token_at(1)
        prefill_share = rate * p
        rho = rate * (p + n * d / b)
        tpot = d / (1.0 - prefill_share)
        ttft = p + rate * p * p / (2.0 * (1.0 - prefill_share)) + rho * d / 2.0
    else:
        batch_s = curve.batch_time_at(b)
        full_load = static_full_batch_load(curve, rate)
        if full_load >= 1.0:
            return LoadPoint(rate, carried=False)
        rho = static_busy_share(rate * batch_s, full_load)
        tpot = d
        ttft = curve.first_token_at(b) + static_batch_wait_s(curve, batch_s, rho, full_load)
    # continuous batching: the batch's quantile (it is within B by capacity_per_s); a static batch is B at most
    at_quantile = 1 + poisson_quantile(b - 1.0, CONCURRENCY_QUANTILE) if curve.continuous else None
    return LoadPoint(rate, carried=True, decode_batch=b, decode_batch_at_quantile=at_quantile,
                     concurrency=rate * (ttft + n * tpot), utilisation=rho, ttft_s=ttft, tpot_s=tpot)


@dataclass(frozen=True)
class ServingLoad:
    """``request_rate_per_s`` served by ``replicas`` identical deployments, each at ``per_replica``."""

    request_rate_per_s: float
    replicas: int
    replicas_to_carry: int               # the fewest that carry the rate (``replicas`` may add some for targets)
    capacity_per_replica_per_s: float
    per_replica: LoadPoint
    engine: str
    batch_limit: str = ""
    curve: ServingCurve | None = field(default=None, compare=False, repr=False)   # to size again (not in JSON)

    @property
    def concurrency(self) -> float:
        """Requests in flight over all replicas."""
        return self.replicas * (self.per_replica.concurrency or 0.0)

    @property
    def utilisation(self) -> float | None:
        return self.per_replica.utilisation

    @property
    def ttft_s(self) -> float | None:
        return self.per_replica.ttft_s

    @property
    def tpot_s(self) -> float | None:
        return self.per_replica.tpot_s

    def to_dict(self) -> dict:
        return {
            "request_rate_per_s": self.request_rate_per_s, "engine": self.engine, "replicas": self.replicas,
            "replicas_to_carry": self.replicas_to_carry,
            "capacity_per_replica_per_s": self.capacity_per_replica_per_s, "concurrency": self.concurrency,
            "concurrency_per_replica": self.per_replica.concurrency, "decode_batch": self.per_replica.decode_batch,
            "decode_batch_at_quantile": self.per_replica.decode_batch_at_quantile,
            "concurrency_quantile": (CONCURRENCY_QUANTILE if self.per_replica.decode_batch_at_quantile is not None
                                     else None),
            "utilisation": self.utilisation, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
            "batch_limit": self.batch_limit,
        }


def serving_load(curve: ServingCurve, rate_per_s: float, *, max_ttft_s: float | None = None,
                 max_tpot_s: float | None = None) -> ServingLoad:
    """The fewest replicas that carry ``rate_per_s`` and, where the targets can be met at all (at a vanishing
    rate), meet ``max_ttft_s`` and ``max_tpot_s``; the figures of one replica there."""
    capacity = capacity_per_s(curve)
    replicas = max(1, math.ceil(rate_per_s / capacity))
    while not load_point(curve, rate_per_s / replicas).carried:    # the boundary, in floating point
        replicas += 1
    to_carry = replicas

    def meets(r: int) -> bool:
        point = load_point(curve, rate_per_s / r)
        return point.carried and (max_ttft_s is None or point.ttft_s <= max_ttft_s) and (
            max_tpot_s is None or point.tpot_s <= max_tpot_s)

    idle_ttft, idle_tpot = curve.first_token_at(1), curve.decode_at(1)     # the limits at a vanishing rate
    reachable = (max_ttft_s is None or idle_ttft < max_ttft_s) and (max_tpot_s is None or idle_tpot < max_tpot_s)
    if reachable and not meets(replicas):
        low, high = replicas, replicas * 2
        while not meets(high) and high < MAX_REPLICAS:
            low, high = high, high * 2
        if meets(high):
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (low, mid) if meets(mid) else (mid, high)
            replicas = high
    return ServingLoad(request_rate_per_s=rate_per_s, replicas=replicas, replicas_to_carry=to_carry,
                       capacity_per_replica_per_s=capacity, per_replica=load_point(curve, rate_per_s / replicas),
                       engine=curve.engine, batch_limit=curve.batch_limit, curve=curve)


def load_fraction(rate_per_s: float, replicas: int, capacity_per_replica_per_s: float) -> float:
    """The rate each replica carries as a share of the most it can carry (1: saturated). Not the GPU's busy
    share (``utilisation``), which continuous batching keeps high well below saturation."""
    return rate_per_s / replicas / capacity_per_replica_per_s
