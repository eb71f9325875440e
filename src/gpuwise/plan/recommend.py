"""The recommendation: every GPU × count on offer, whether it fits, how long, what it costs, and why
each option that lost did lose."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from gpuwise.catalog.errors import CatalogError
from gpuwise.catalog.loader import user_catalog_path
from gpuwise.catalog.model import GPU, Catalog, Offer
from gpuwise.catalog.resolve import resolve_gpu
from gpuwise.catalog.topology import topology_for
from gpuwise.plan.constraints import Constraints, JobSize, apply_constraints, relative_misses
from gpuwise.plan.errors import PlanError
from gpuwise.plan.fit import usable_of
from gpuwise.plan.money import RATES_CHECKED, rates_in, shown_cost
from gpuwise.plan.offers import (candidate_offers, cheapest_offers, clusters_refused, larger_than_a_machine,
                                 node_size, ranking_currency, spot_policy)
from gpuwise.plan import reasons
from gpuwise.plan.profile import (MAX_AUTO_BATCH, WorkloadModel, cannot_run, estimate_fit,
                                  fitting_micro_batch, largest_divisor_at_most, largest_fitting_batch,
                                  serving_nodes_refusal, workload_on)
from gpuwise.plan.quote import Quote, make_quote
from gpuwise.plan.remedies import find_remedies
from gpuwise.plan.spot import SpotRisk, describe_serving, spot_outcome
from gpuwise.runtime.model import Note
from gpuwise.runtime.serving_load import concurrency_rule, serving_load
from gpuwise.runtime.stack import Stack, assumed_stack
from gpuwise.units import format_bytes, format_count, format_duration, format_money, format_request_rate
from gpuwise.workload import Workload
from gpuwise.workload.decoder import is_llm
from gpuwise.workload.parallelism import splits_layers
from gpuwise.workload.precision import parse

GPU_COUNTS = (1, 2, 4, 8)    # the counts quoted on one machine (--max-gpus N keeps those up to N)
# --max-gpus beyond a machine quotes the doublings past GPU_COUNTS (16, 32 …: 2, 4 … machines of 8), up to this
MAX_GPUS = 1024


Option = Quote   # a recommendation's option is the one quote row


@dataclass(frozen=True)
class Recommendation:
    """What ``recommend`` answers: every GPU × count × offer quoted for the whole job (``options``, each a
    ``Quote`` with its own price and currency and ``total_cost_ranked`` in ``ranking_currency``, those left out
    saying why), and the picks among those that fit and meet the ``Constraints``: ``best`` (cheapest),
    ``fastest``, ``best_value``. None of them where nothing meets the constraints: ``nothing_meets`` says why and
    ``closest`` lists the options nearest to meeting them. ``remedies``: changes that make the job fit cheaper
    GPUs (``recommend(..., remedies=True)``). ``fallback_precision``: GPU id -> the precision its options were
    quoted at where that is not ``workload.precision`` (a default bf16 at fp16 on GPUs without bf16).
    ``to_dict()`` is the `gpuwise recommend --json` object."""

    workload: Workload
    method: str
    ranking_currency: str
    options: tuple[Option, ...]
    best: Option | None
    fastest: Option | None
    best_value: Option | None
    nothing_meets: str | None = None
    closest: tuple[Option, ...] = ()
    # why nothing meets the request, without "the closest options are listed" (what `--emit` refuses with)
    nothing_reason: str | None = field(default=None, compare=False)
    notes: tuple[str, ...] = ()
    remedies: tuple[dict, ...] = field(default=())
    # GPU id -> the precision its options were quoted at, where that is not ``workload.precision``: a
    # default bf16 (LoRA/QLoRA, LLM serving) runs at its fp16 twin on GPUs without bf16.
    fallback_precision: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        def opt(o: Option | None):
            return None if o is None else o.to_dict()

        return {
            "workload": self.workload.to_dict(), "method": self.method,
            "ranking_currency": self.ranking_currency,
            "exchange_rates": {"units_of_ranking_currency_per_unit": rates_in(self.ranking_currency),
                               "checked": RATES_CHECKED, "indicative": True},
            "options": [o.to_dict() for o in self.options],
            "best": opt(self.best), "fastest": opt(self.fastest), "best_value": opt(self.best_value),
            "nothing_meets": self.nothing_meets, "closest": [o.to_dict() for o in self.closest],
            "remedies": list(self.remedies), "notes": list(self.notes),
            "fallback_precision": dict(self.fallback_precision),
        }


def auto_micro_batch(effective_batch: int | None, *, serving: bool = False) -> int:
    """The micro-batch ``--batch-size auto`` starts from: the effective batch, which each option then cuts
    to the largest divisor that fits. Training needs ``--effective-batch`` to say what to keep; serving (no
    optimizer step) takes the most requests that fit each option, up to ``MAX_AUTO_BATCH`` (vLLM: its capacity)."""
    if effective_batch is None and serving:
        return MAX_AUTO_BATCH
    if effective_batch is None:
        raise PlanError("--batch-size auto needs --effective-batch N (the samples per optimizer step to keep)")
    if effective_batch < 1:
        raise PlanError(f"--effective-batch must be at least 1, got {effective_batch}")
    return min(effective_batch, 1 << 20)


# -- evaluation -------------------------------------------------------------------------------------
def recommend(
    model: WorkloadModel,
    catalog: Catalog,
    *,
    job: JobSize,
    constraints: Constraints = Constraints(),
    provider: str | None = None,
    gpu_ids: Iterable[str] | None = None,
    max_gpus: int = 8,
    spot: bool = False,
    auto_batch: bool = False,
    effective_batch: int | None = None,
    per_gpu_batch: bool = False,
    currency: str | None = None,
    remedies: bool = False,
    spot_risk: SpotRisk = SpotRisk(),
    progress: Callable[[str], None] | None = None,
) -> Recommendation:
    """Every GPU × count on offer, quoted for the whole job, ranked by cost in one currency.

    The effective batch (samples per optimizer step) is the same on every option: ``effective_batch``,
    else the workload's micro-batch × accumulation; each option splits it over its GPUs (micro-batch ×
    accumulation × GPUs), so every option trains the same model. ``per_gpu_batch`` opts out: every GPU
    runs the workload's micro-batch and the effective batch grows with the count. ``auto_batch``
    picks, per option, the largest micro-batch that fits and makes up the rest with accumulation.
    ``remedies``: for cheaper GPUs that ran out of memory, the changes that make the job fit there.
    ``provider``: only its offers (any case; PlanError naming the known ones when unknown). ``gpu_ids``: only
    these GPUs, a list of names the catalog resolves (``resolve_gpu_ids``: canonical id, alias or NVML name,
    ``["t4", "Tesla T4"]``; CatalogError for an unknown or ambiguous one, PlanError for a lone string);
    None: every GPU on offer.
    ``spot_risk``: how spot offers (with ``spot``) are priced: expected time and cost with preemptions.
    Where the workload's precision is the default rule's (``Workload.precision_default``), GPUs without
    bf16 run the job at its fp16 twin instead of being excluded (``Recommendation.fallback_precision``
    names them: ``plan.profile.workload_on``, the rule every command applies). Either way each option is
    decided by ``cannot_run`` on the workload it is quoted at, with an explicit micro-batch or
    ``auto_batch`` alike.
    """
    check_max_gpus(max_gpus)
    if effective_batch is not None and effective_batch < 1:
        raise PlanError(f"--effective-batch must be at least 1, got {effective_batch}")
    if per_gpu_batch and (effective_batch is not None or auto_batch):
        raise PlanError("--per-gpu-batch keeps the micro-batch per GPU: it cannot go with --effective-batch "
                        "or --batch-size auto")
    progress = progress or (lambda _m: None)
    workload = model.workload
    if constraints.latency_targets and (workload.is_training or model.method != "closed-form"):
        raise PlanError("--ttft and --tpot are targets for serving a decoder LLM (--mode infer): "
                        f"this job is {'training' if workload.is_training else 'not an LLM the closed form serves'}")
    if constraints.max_tpot_s is not None and workload.max_new_tokens < 1:
        raise PlanError("--tpot is a time per output token: give --max-new-tokens N (N >= 1 tokens an answer)")
    at_rate = workload.request_rate_per_s is not None
    if at_rate and model.method != "closed-form":
        raise PlanError("--request-rate sizes serving a decoder LLM (the closed form): this job is not one")
    if at_rate and auto_batch:
        raise PlanError("--batch-size auto searches one batch; at --request-rate the batch is what the load makes it "
                        "(HF generate: --batch-size N caps it, the largest that fits where N does not)")
    if at_rate and constraints.deadline_s is not None:
        raise PlanError("--deadline is for a job of a given size: a load (--request-rate) is served by the hour "
                        "(--budget caps the cost per hour)")
    gpu_ids = resolve_gpu_ids(catalog, gpu_ids) if gpu_ids is not None else None
    offers = candidate_offers(catalog, provider=provider, gpu_ids=gpu_ids, spot=spot_policy(spot))
    rank_in = ranking_currency(offers, currency)
    effective = effective_batch or workload.batch_size * workload.grad_accum_steps
    gpus = {g.id: g for g in catalog.gpus}
    # what keeps offers from the counts asked for: a provider that rents no cluster, an instance larger than a machine
    machine_notes = tuple(n for n in (no_clusters_note(offers, gpus, max_gpus),
                                      larger_than_a_machine_note(offers, gpus)) if n)
    fallback: dict[str, str] = {}      # GPU id -> the precision quoted there, where not the workload's
    no_bf16: dict[str, str] = {}       # GPU id -> its architecture, where the job cannot run at all

    options: list[Option] = []
    for gpu_id in sorted({o.gpu_id for o in offers}):
        gpu = gpus[gpu_id]
        progress(f"estimating on {gpu.name}")
        for count in quoted_counts(max_gpus):
            for offer in cheapest_offers(offers, gpu, count, rank_in):     # on-demand and spot, each its option
                target = effective * count if per_gpu_batch else effective
                option = _evaluate(model, gpu, offer, count, job, constraints, target, auto_batch, rank_in,
                                   spot_risk)
                there = workload_on(workload, gpu).precision
                if there != workload.precision:
                    fallback[gpu_id] = there
                    option = replace(option, warnings=option.warnings + (
                        Note(Note.PRECISION_FALLBACK, f"runs at {there} here: {gpu.arch} has no bf16"),))
                elif cannot_run(workload, gpu):
                    no_bf16[gpu_id] = gpu.arch
                options.append(option)

    options = apply_constraints(options, constraints, rank_in)
    eligible = [o for o in options if o.eligible]
    fitting = [o for o in options if o.fits and o.total_time_s is not None]
    # at a load every option serves an hour: "fastest" is what a request waits for its whole answer
    def time_of(o: Option) -> float | None:     # None: not timed (left out before it was)
        if not at_rate:
            return o.total_time_s
        return o.ttft_s + workload.max_new_tokens * o.tpot_s if o.ttft_s is not None and o.tpot_s is not None else None

    def rank(o: Option) -> tuple:
        return rank_key(o, time_of(o))

    best = min(eligible, key=rank, default=None)
    fastest = min(fitting, key=lambda o: (time_of(o), o.total_cost_ranked), default=None)
    # Best value: the least cost × time among those that meet every constraint (the knee of the front).
    best_value = min(eligible, key=lambda o: o.total_cost_ranked * time_of(o), default=None)
    nothing, closest, reason = None, (), None
    if not offers:
        reason = no_offers(catalog, provider, gpu_ids, spot)
        nothing = f"nothing meets the request: {reason}"
    elif not options:     # offers, but none at a count quoted (Lambda rents an A100 8 at a time; --max-gpus 4)
        reason = "; ".join((no_offer_at_counts(offers, max_gpus, suggest_offer=not machine_notes), *machine_notes))
        nothing = f"nothing meets the request: {reason}"
    elif best is None:
        nothing, closest, reason = _nothing_meets(options, constraints, rank_in, workload.precision, no_bf16)
    batch_note = (_load_note(workload, constraints) if at_rate else
                  ("the most requests that fit each option served together" if auto_batch else
                   f"{workload.batch_size} requests served together on every option") + f" ({model.method}: "
                  f"{'a decoder LLM is split over its GPUs by ' + _split_words(workload) if model.method == 'closed-form' else 'each GPU serves its own batch'})"
                  if not workload.is_training else
                  f"effective batch {format_count(effective, 'sample')} per step on every option (micro-batch × accumulation × GPUs)"
                  if not per_gpu_batch else
                  f"--per-gpu-batch: micro-batch {workload.batch_size} on every GPU, so the effective batch "
                  f"grows with the GPU count")
    unquoted = unquoted_counts(offers, max_gpus)
    bare_budget = (f"budget {format_money(constraints.budget, rank_in)}: a --budget without a currency is in the "
                   f"ranking currency, {rank_in} here (--currency, else the offers' own where they share one, else "
                   "CNY); write 300CNY (¥300: yuan), 40USD or 5000JPY to say which" if constraints.budget is not None
                   and constraints.budget_currency is None else None)
    spot_machines = tuple(o.nodes for o in options if o.spot)     # each spot option's machines, preempted apart
    notes = (
        batch_note,
        *((unquoted,) if unquoted else ()),
        *(machine_notes if options else ()),
        *((bare_budget,) if bare_budget else ()),
        *(((describe_serving(spot_risk) if at_rate else spot_risk.describe(spot_machines)),) if spot_machines
          else ()),
        *((spot_outcome(options, best, provider),) if spot else ()),
        *((input_note,) if (input_note := _input_outcome(workload, options, model)) else ()),
        *((ram_note,) if (ram_note := host_ram_note(workload, options)) else ()),
        f"costs ranked in {rank_in}; exchange rates indicative as of {RATES_CHECKED}",
        f"times are for {assumed_stack(workload, closed_form_llm=is_llm(workload))} (docs/runtime.md: what "
        "the prediction assumes)",
    )
    options.sort(key=rank)      # the order best picks by: the best is the first row
    rec = Recommendation(workload, model.method, rank_in, tuple(options), best, fastest, best_value,
                         nothing, tuple(closest), reason, notes, fallback_precision=fallback)
    if remedies and not at_rate:     # remedies are quoted for a job of a given size, not yet at a load
        def price_option(remedied, gpu: GPU, offer: Offer, count: int, target: int) -> Option:
            # a remedy is priced as a row of this table is: the same rule, batch split, spot risk and currency
            return _evaluate(remedied, gpu, offer, count, job, constraints, target, auto_batch, rank_in, spot_risk)

        rec = replace(rec, remedies=find_remedies(rec, catalog, job, constraints, progress=progress,
                                                   correction=model.correction, price_option=price_option,
                                                   job_model=model))
    return rec


def rank_key(option: Option, time_s: float | None) -> tuple:
    """The one order of the options, the best first: those that meet every constraint, then those that fit;
    cheaper first as the costs read (``plan.money.shown_cost``), on a tie the faster (``time_s``: the job's time, at
    a load a request's answer; None: untimed, last), then by GPU and count. So the best is the first row, its
    marker on it, and 8 GPUs that cost what 1 costs, to the cent, in an eighth of the time are the best."""
    cost = shown_cost(option.total_cost_ranked) if option.total_cost_ranked is not None else math.inf
    return (not option.eligible, not option.fits, cost, time_s if time_s is not None else math.inf, option.gpu,
            option.count)


def resolve_gpu_ids(catalog: Catalog, names: Iterable[str]) -> tuple[str, ...]:
    """The canonical ids of the GPUs ``names`` names, in order, each once: every name goes through the catalog's
    one resolver (``gpuwise.catalog.resolve_gpu``: id, alias or NVML name, any case), so ``recommend``'s
    ``gpu_ids`` and ``--gpus`` take the same names. CatalogError for a name that is no GPU (with the closest
    known ones; a bare number is said to be a count, which ``--max-gpus`` sets) or several (``a100``);
    PlanError for a lone string (a list of names is asked for, not the letters of one) or no name at all."""
    if isinstance(names, str):
        listed = [n.strip() for n in names.split(",") if n.strip()]
        raise PlanError(f"gpu_ids takes a list of GPU names, not the string {names!r}: gpu_ids={listed!r}")
    names = list(names)
    if not names:
        raise PlanError("gpu_ids names no GPU: give names, e.g. ['rtx-4090', 'a100-80gb-sxm4'] (None: every GPU)")
    ids: dict[str, None] = {}
    for name in names:
        if not isinstance(name, str):
            raise PlanError(f"gpu_ids takes GPU names (str), not {type(name).__name__}: {str(name)[:60]!r}")
        try:
            ids[resolve_gpu(catalog, name).id] = None
        except CatalogError as e:
            if not name.strip().isdigit():
                raise
            raise CatalogError(f"{e}; --gpus names GPUs, --max-gpus {name.strip()} sets how many of each") from None
    return tuple(ids)


def check_max_gpus(max_gpus: int) -> None:
    """--max-gpus N quotes the counts of ``quoted_counts(N)`` (3: 1 and 2 GPUs; 16: 1 to 8 and 16); less than one or
    more than ``MAX_GPUS`` is refused (PlanError, exit 2), not capped in silence."""
    if max_gpus < 1:
        raise PlanError(f"--max-gpus must be at least 1, got {max_gpus}")
    if max_gpus > MAX_GPUS:
        raise PlanError(f"--max-gpus {max_gpus}: recommend quotes {_quotable_words()} GPUs, at most {MAX_GPUS}")


def quoted_counts(max_gpus: int) -> tuple[int, ...]:
    """The GPU counts recommend quotes up to ``max_gpus``: ``GPU_COUNTS`` (one machine), then their doublings (16,
    32 …: whole machines of 8, where a provider rents several as one cluster, ``plan.offers.cheapest_offer``)."""
    counts = [c for c in GPU_COUNTS if c <= max_gpus]
    more = GPU_COUNTS[-1] * 2
    while more <= min(max_gpus, MAX_GPUS):
        counts.append(more)
        more *= 2
    return tuple(counts)


def _quotable_words() -> str:
    """The counts recommend quotes, in words: ``1, 2, 4, 8, 16, 32 …``."""
    return f"{', '.join(map(str, quoted_counts(32)))} …"


def counts_words(counts: Iterable[int], conjunction: str = "or") -> str:
    """Counts in words: ``1, 2 or 4``."""
    counts = [str(c) for c in sorted(set(counts))]
    return counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} {conjunction} {counts[-1]}"


def no_offer_at_counts(offers: list[Offer], max_gpus: int, *, suggest_offer: bool = True) -> str:
    """Why offers for the GPUs asked for give no option: none is for a count quoted up to ``max_gpus`` (and
    no single-GPU price makes one): who rents them how many at a time, and what to raise. ``suggest_offer``: where
    nothing is to raise, suggest an offer of a quoted count (False: the caller says what keeps them out)."""
    quoted = quoted_counts(max_gpus)
    by_rental: dict[tuple[str, str], set[int]] = {}
    for o in offers:
        by_rental.setdefault((o.provider, o.gpu_id), set()).add(o.count)
    rentals = "; ".join(f"{provider} rents {gpu} {counts_words(counts)} at a time"
                        for (provider, gpu), counts in sorted(by_rental.items()))
    quotable = quoted_counts(MAX_GPUS)
    larger = sorted({o.count for o in offers if o.count in quotable and o.count > max_gpus})
    hint = (f"; raise --max-gpus to {larger[0]}" if larger else
            f"; recommend quotes {_quotable_words()} GPUs: add an [[offer]] for one of those counts (docs/catalog.md)"
            if suggest_offer else "")
    return f"no offer at {counts_words(quoted)} GPU{'s' if quoted != (1,) else ''} (--max-gpus {max_gpus}): " \
           f"{rentals}{hint}"


def unquoted_counts(offers: Iterable[Offer], max_gpus: int = GPU_COUNTS[-1]) -> str | None:
    """The offers recommend does not quote, said: a count that is none of ``quoted_counts`` (a catalog's ``count =
    3`` or ``12``) is neither an option nor priced per GPU for another count; a price of the user's own over a
    machine's 8 GPUs and above ``max_gpus`` (a lab's ``count = 16``) is quoted with a larger --max-gpus (a shipped
    offer of that many is one instance larger than a machine: ``larger_than_a_machine_note``)."""
    offers = list(offers)
    quotable = quoted_counts(MAX_GPUS)
    odd = sorted({(o.provider, o.gpu_id, o.count) for o in offers if o.count not in quotable})
    # a price of the user's own for several machines (a lab's 16), quoted with a --max-gpus that reaches it
    above = sorted({(o.provider, o.gpu_id, o.count) for o in offers
                    if o.own and o.count in quotable and GPU_COUNTS[-1] < o.count and max_gpus < o.count})
    said = []
    if odd:
        said.append(f"{_offers_words(odd)} (recommend quotes {_quotable_words()} GPUs; an offer for another count "
                    "is not used)")
    if above:
        said.append(f"{_offers_words(above)} (over --max-gpus {max_gpus}: "
                    f"--max-gpus {above[0][2]} quotes it)")
    return f"not quoted: {'; '.join(said)}" if said else None


def _offers_words(offers: Iterable[tuple[str, str, int]]) -> str:
    """(provider, GPU, count) in words: ``lab's 16x a100-80gb-sxm4, aws's 8x t4``."""
    return ", ".join(f"{provider}'s {count}x {gpu}" for provider, gpu, count in offers)


def no_clusters_note(offers: Iterable[Offer], gpus: dict[str, GPU], max_gpus: int) -> str | None:
    """One line for the providers whose offers give no option of more GPUs than one machine holds, though
    ``max_gpus`` asks for such counts: they rent no cluster of several machines (``plan.offers.clusters_refused``,
    in their own words); None where none is kept so."""
    refused: dict[str, str] = {}
    for o in offers:
        machine = node_size(gpus[o.gpu_id], o.provider)
        asked_beyond = quoted_counts(max_gpus)[-1] > machine
        # a price of the user's own for several machines is their word: quoted whatever the provider rents
        why = clusters_refused(o.provider) if asked_beyond and not (o.own and o.count > machine) else None
        if why:
            refused.setdefault(o.provider, why)
    if not refused:
        return None
    them = ", ".join(sorted(refused))
    return (f"nothing over one machine is quoted from {them} (--max-gpus {max_gpus}): "
            f"{'it rents' if len(refused) == 1 else 'they rent'} no cluster of several machines ("
            + "; ".join(refused[p] for p in sorted(refused)) + ")")


def larger_than_a_machine_note(offers: Iterable[Offer], gpus: dict[str, GPU]) -> str | None:
    """One line for the offers that price nothing because each is one instance of more GPUs than a machine of its
    GPU holds there (``plan.offers.larger_than_a_machine``: a catalog's ``gpus_per_node = 4`` beside AWS's 8-GPU
    p4de): the launch asks for whole machines of 4, which that instance is not; None where there is none."""
    said = sorted({(o.provider, o.gpu_id, o.count, size) for o in offers
                   if larger_than_a_machine(o, size := node_size(gpus[o.gpu_id], o.provider))})
    if not said:
        return None
    listed = "; ".join(f"{p}'s {n}x {g} is one machine of {n}, more than a machine of {g} holds ({size}"
                       f"{', your gpus_per_node' if gpus[g].gpus_per_node else ''})" for p, g, n, size in said)
    return (f"not quoted: {listed}; the launch asks for whole machines of that size, which no such offer is (a price "
            "of yours for a machine of that size prices them: docs/catalog.md)")


def no_offers(catalog: Catalog, provider: str | None, gpu_ids: Iterable[str] | None, spot: bool) -> str:
    """Why a recommendation has no option at all, and what would give it one: the offers of other providers
    (or spot ones) for those GPUs, and the user's own price in a catalog file (docs/catalog.md)."""
    ids = sorted(set(gpu_ids)) if gpu_ids is not None else None
    them = "it" if ids and len(ids) == 1 else "them"
    said = [f"no offers{f' from provider {provider!r}' if provider else ''} for {', '.join(ids) if ids else 'any GPU'}"]
    if provider is not None:
        others = sorted({o.provider for o in candidate_offers(catalog, gpu_ids=ids, spot=spot_policy(spot))})
        if others:
            said[0] += f": {', '.join(others)} offer{'s' if len(others) == 1 else ''} {them} (leave out --provider)"
    if not spot and candidate_offers(catalog, provider=provider, gpu_ids=ids, spot="only"):
        said.append(f"spot offers only: --spot includes {them}")
    said.append(f"to price {them} yourself, add an [[offer]] to {user_catalog_path()} or to a file given with "
                "--catalog FILE, as docs/catalog.md shows")
    return "; ".join(said)


def _split_words(workload: Workload) -> str:
    """How a decoder LLM's GPUs share it when it serves (``splits_layers``), in a few words."""
    if splits_layers(workload.with_(num_gpus=2)):
        return 'layers, run one GPU after another (HF generate, device_map="auto")'
    return "tensor parallelism"


def _load_note(workload: Workload, constraints: Constraints) -> str:
    """What every option of a recommendation at a load is."""
    targets = " and meet --ttft/--tpot" if constraints.latency_targets else ""
    return (f"{format_request_rate(workload.request_rate_per_s)} (Poisson arrivals) of "
            f"{workload.tokens_per_sequence:,} prompt + {workload.max_new_tokens:,} new tokens: each option is the fewest replicas of its GPUs ("
            f"{_split_words(workload)} within a replica) that carry it{targets}, ranked by cost per hour at that load (the same "
            "order as cost per million output tokens)"
            + (f"; {concurrency_rule()}" if workload.engine == "vllm" else ""))


def host_ram_note(workload: Workload, options) -> str | None:
    """What ``--offload`` needs of each option's host RAM (``Quote.cpu_offload_bytes``), said once: the offers do
    not list their machines' RAM, so the renter checks it (None: nothing offloaded)."""
    needs = sorted({o.cpu_offload_bytes for o in options if o.cpu_offload_bytes})
    if not needs:
        return None
    amount = format_bytes(needs[-1]) if len(needs) == 1 else f"{format_bytes(needs[0])} to {format_bytes(needs[-1])}"
    return (f"--offload {workload.offload}: {amount} of host RAM (CPU memory, all of an option's GPUs together: "
            "cpu_offload_bytes) beside the GPUs; the offers do not say how much RAM their machines have: check "
            "before renting")


def _input_outcome(workload: Workload, options, model) -> str | None:
    """What a given input rate (--input-rate, or --cpu-workers on images: ``model.frames_per_sample`` JPEGs a
    sample) did to the options, said even when it limits none of them (a flag that changes nothing reads as
    ignored)."""
    if not Stack.from_workload(workload).input_rate:
        return None
    stack = Stack.from_workload(workload, model.frames_per_sample)
    timed = [o for o in options if o.fits and o.bound is not None]
    waiting = sum(1 for o in timed if o.bound == "input")
    said = f"the {stack.describe_input()} per GPU: "
    if not waiting:
        return said + f"none of the {len(timed)} options that fit waits on it (each GPU needs fewer samples/s)"
    return said + (f"{waiting} of the {len(timed)} options that fit wait on it (bound 'input': a faster GPU "
                   "would not go faster there)")


def _evaluate(model, gpu: GPU, offer: Offer, count: int, job: JobSize, constraints: Constraints,
              effective: int, auto_batch: bool, rank_in: str, spot_risk: SpotRisk) -> Option:
    workload = workload_on(model.workload, gpu)
    nodes = topology_for(gpu, offer.provider).nodes(count)     # the machines the launch asks for, as timed below
    # serving keeps no effective batch (samples per optimizer step): None there, as in estimate's JSON
    quote = dict(headroom_fraction=constraints.headroom_fraction, ranking_currency=rank_in,
                 effective_batch_size=effective if workload.is_training else None, nodes=nodes)

    def excluded(exclusion: reasons.Exclusion, **known) -> Option:
        known.setdefault("peak_total_bytes", None)
        return make_quote(gpu, count, offer, step_time_s=None, exclusion=exclusion, **quote, **known)

    why = cannot_run(workload.with_(num_gpus=count), gpu)     # N slices of a MIG GPU among the reasons
    if why:
        return excluded(reasons.cannot_run(why))
    why = model.count_refusal(count)
    if why:
        return excluded(reasons.count_refused(why))
    if model.method == "closed-form" and (why := serving_nodes_refusal(workload, count,
                                                                        topology_for(gpu, offer.provider))):
        return excluded(reasons.count_refused(why))
    if workload.is_training and effective % count:
        # the effective batch (micro-batch × accumulation) is what every option keeps: it must split
        return excluded(reasons.batch_does_not_split(effective, count, workload.batch_size))
    per_gpu = effective // count if workload.is_training else workload.batch_size

    where = offer.provider     # the provider's machines: its links inside a node and between nodes
    split_note = ()
    if workload.is_training:
        # the effective batch is kept: the largest micro-batch (a divisor of the per-GPU batch, from all of it
        # with auto, from --batch-size without) that fits at the accumulation it runs (plan.profile)
        asked = per_gpu if auto_batch else largest_divisor_at_most(per_gpu, min(workload.batch_size, per_gpu))
        micro = fitting_micro_batch(model, gpu, per_gpu, start=asked, count=count,
                                    headroom_fraction=constraints.headroom_fraction, provider=where)
        if micro == 0 and auto_batch:
            est = model.estimate(gpu, count=count, batch_size=1, grad_accum_steps=per_gpu, with_time=False,
                                 provider=where)
            fit = estimate_fit(est, constraints.headroom_fraction)
            return excluded(fit.exclusion, batch_size=1, grad_accum_steps=per_gpu,
                            peak_total_bytes=est.memory.total_upper_bytes, fit=fit)
        # --batch-size does not divide what each GPU takes a step: the largest micro-batch under it that does
        undivided = (f"micro-batch {workload.batch_size} does not divide the {per_gpu} samples a GPU takes a step"
                     if asked < min(workload.batch_size, per_gpu) else "")
        # and what a practitioner does when the micro-batch does not fit: the same effective batch in smaller
        # micro-batches with accumulation (the model trained is the same)
        unfit = f"micro-batch {asked} does not fit" if 0 < micro < asked else ""
        if not auto_batch and micro > 0 and (undivided or unfit):
            why = (f"{undivided}, and {asked} does not fit" if undivided and unfit else undivided or unfit)
            split_note = (Note(Note.BATCH_SPLIT, f"{why}: {micro} × {per_gpu // micro} accumulation steps instead "
                                                 "(the same effective batch)"),)
        micro = max(micro, 1)       # none fits: quoted (and left out) at batch 1
        accum = per_gpu // micro
    elif auto_batch:
        # serving keeps no effective batch: the most requests that fit
        micro = largest_fitting_batch(model, gpu, count=count, headroom_fraction=constraints.headroom_fraction,
                                      limit=per_gpu, provider=where)
        if micro == 0:
            est = model.estimate(gpu, count=count, batch_size=1, with_time=False, provider=where)
            fit = estimate_fit(est, constraints.headroom_fraction)
            return excluded(fit.exclusion, batch_size=1, peak_total_bytes=est.memory.total_upper_bytes, fit=fit)
        accum = 1
    else:
        micro, accum = per_gpu, 1

    est = model.estimate(gpu, count=count, batch_size=micro, grad_accum_steps=accum, provider=where)
    step = est.time
    serving = est.inference if not workload.is_training else None
    latency = dict(ttft_s=getattr(serving, "ttft_s", None), tpot_s=getattr(serving, "time_per_output_token_s", None))
    if workload.request_rate_per_s is not None:
        return _at_load(gpu, count, offer, est, serving, constraints, quote, split_note)
    if workload.is_training:
        steps = job.optimizer_steps(effective)
    else:   # batches to serve: the samples one step serves, as the model counts them (tensor parallel: one batch)
        served = round(step.samples_per_s * step.step_time_s) if step is not None else per_gpu * count
        steps = job.optimizer_steps(max(1, served))
    total_time_s = steps * step.step_time_s if step is not None else None
    preemption_s = None
    if offer.spot and total_time_s is not None:
        expected = spot_risk.expected_time_s(total_time_s, machines=nodes)     # any machine's preemption stops it
        preemption_s, total_time_s = expected - total_time_s, expected
    fit = estimate_fit(est, constraints.headroom_fraction)
    option = make_quote(
        gpu, count, offer, peak_total_bytes=est.memory.total_upper_bytes, step_time_s=step.step_time_s if step else None,
        fit=fit, batch_size=micro, grad_accum_steps=accum, steps=steps, total_time_s=total_time_s,
        preemption_time_s=preemption_s,
        bound=step.bound if step else None, regime=step.regime if step else None, calibration=est.calibration,
        cpu_offload_bytes=est.cpu_offload_bytes, warnings=split_note + (tuple(step.warnings) if step else ()), **latency, **quote,
    )
    if not option.fits:
        option = replace(option, exclusion=fit.exclusion)
    return option


def _at_load(gpu: GPU, count: int, offer: Offer, est, serving, constraints: Constraints, quote: dict,
             warnings: tuple[str, ...]) -> Option:
    """The option at ``--request-rate``: the fewest replicas that carry the load (and meet the latency targets
    where they can be met: ``gpuwise.runtime.serving_load``), its loaded TTFT and TPOT, priced by the hour."""
    step = est.time
    load = serving.at_load if serving is not None else None
    if load is not None and constraints.latency_targets:
        load = serving_load(load.curve, load.request_rate_per_s, max_ttft_s=constraints.max_ttft_s,
                            max_tpot_s=constraints.max_tpot_s)
    figures = {}
    if load is not None:
        per_hour = load.replicas * offer.price_per_hour
        tokens_per_hour = load.request_rate_per_s * serving.new_tokens * 3600.0
        figures = dict(request_rate_per_s=load.request_rate_per_s, replicas=load.replicas,
                       concurrency=load.concurrency, utilisation=load.utilisation,
                       capacity_per_replica_per_s=load.capacity_per_replica_per_s, ttft_s=load.ttft_s,
                       tpot_s=load.tpot_s, total_time_s=3600.0, total_cost=per_hour, cost_per_hour_at_load=per_hour,
                       cost_per_million_tokens=per_hour / (tokens_per_hour / 1e6))
    fit = estimate_fit(est, constraints.headroom_fraction)
    option = make_quote(
        gpu, count, offer, peak_total_bytes=est.memory.total_upper_bytes, fit=fit,
        step_time_s=step.step_time_s if step else None, batch_size=serving.batch_size if serving is not None else None, bound=step.bound if step else None,
        regime=step.regime if step else None, calibration=est.calibration,
        warnings=warnings + (tuple(step.warnings) if step else ()), **figures, **quote,
    )
    if not (option.fits and load is not None):    # no load carried: no replica holds a sequence
        return replace(option, fits=False, exclusion=fit.exclusion)
    return option


def _nothing_meets(options: list[Option], c: Constraints, currency: str, precision: str, no_bf16: dict[str, str]):
    """Why no option is the best, in words, the closest options, and the reason alone (without "the
    closest options are listed"). ``no_bf16``: GPU id -> architecture of the GPUs the job cannot run on
    (``cannot_run``) at ``precision``. ``options`` is not empty (``no_offers`` says why it would be)."""
    fitting = [o for o in options if o.fits]
    if options and all(o.gpu in no_bf16 for o in options):
        archs = ", ".join(dict.fromkeys(no_bf16[o.gpu] for o in options))
        reason = (f"no GPU on offer has bf16 ({archs}), which {precision} needs: use --precision "
                  f"{parse(precision).fp16_twin}, or GPUs of Ampere or newer")
        return f"nothing meets the request: {reason}", (), reason
    if not fitting:
        split = any(o.exclusion is not None and o.exclusion.kind == reasons.SPLIT for o in options)
        hint = (" (the multi-GPU options need an effective batch they can split: --effective-batch N, or "
                "--per-gpu-batch to run the batch on every GPU)" if split else "")
        refused = could_hold_at_fp16(options, no_bf16, c.headroom_fraction)
        if refused:
            hint += (f"; {', '.join(refused)} {'has' if len(refused) == 1 else 'have'} no bf16 "
                     f"(--precision {parse(precision).fp16_twin} runs there)")
        reason = _does_not_fit_words(options, " with bf16" if refused else "") + hint
        return f"nothing meets the request: {reason}", (), reason
    what = {}     # constraint kind -> the constraint in words
    if c.max_ttft_s is not None:
        what[reasons.LATENCY] = f"a time to first token of {format_duration(c.max_ttft_s)}"
    if c.max_tpot_s is not None:
        tpot = f"a time per output token of {format_duration(c.max_tpot_s)}"
        what[reasons.LATENCY] = f"{what[reasons.LATENCY]} and {tpot}" if reasons.LATENCY in what else tpot
    if c.deadline_s is not None:
        what[reasons.DEADLINE] = f"the deadline of {format_duration(c.deadline_s)}"
    if c.budget is not None:
        what[reasons.BUDGET] = f"the budget of {format_money(c.budget, c.budget_currency or currency)}"

    def total_miss(o) -> tuple[float, float, float]:   # the shares by which it misses each, added; cheaper, faster
        return (sum(relative_misses(o, c, currency).values()), o.total_cost_ranked or 0.0, o.total_time_s or 0.0)

    closest = sorted(fitting, key=total_miss)[:3]
    reason = f"nothing meets {' and '.join(what.values()) or 'the request'}"
    listed = "the closest options are listed"
    if len(what) > 1:
        reason += f": {_each_alone(fitting, list(what))}"
        listed += f", the least missed first (% over {' + % over '.join(_CONSTRAINT_WORDS[k] for k in what)})"
    return f"{reason}; {listed}", closest, reason


def _does_not_fit_words(options: list[Option], which: str) -> str:
    """Why no option fits, in words: the weights alone where they are more than the GPU of every option sized holds
    for them (``Exclusion.weights_alone``: no smaller batch would fit), else the job at its batch size. ``which``:
    what narrows the GPUs on offer (" with bf16")."""
    sized = [o for o in options if o.exclusion is not None and o.exclusion.kind in (reasons.OOM, reasons.OOM_RISK)]
    if sized and all(o.exclusion.weights_alone for o in sized):
        most = max(o.count for o in sized)
        if most == 1:
            return f"the model's weights alone do not fit on any one GPU on offer{which}: no batch size fits"
        return (f"the model's weights alone do not fit on any GPU on offer{which}, on up to {most} of them: "
                "no batch size fits")
    return f"the job does not fit on any GPU on offer{which} at this batch size"


def could_hold_at_fp16(options: list[Option], no_bf16: dict[str, str], headroom_fraction: float) -> list[str]:
    """The GPUs without bf16 (``no_bf16``) worth naming beside "the job does not fit": those whose usable memory
    holds the smallest peak any option was sized at. Their options were never sized (refused first), but the fp16
    twin keeps the same 2-byte tensors as bf16, so a GPU below every option's need holds it at neither; where no
    option was sized at all, each is named (nothing says it is too small)."""
    needs_bytes = [o.peak_total_bytes for o in options if o.peak_total_bytes is not None]
    smallest_need_bytes = min(needs_bytes, default=0)
    return sorted({o.gpu for o in options
                   if o.gpu in no_bf16 and usable_of(o.gpu_memory_bytes, headroom_fraction) >= smallest_need_bytes})


_CONSTRAINT_WORDS = {reasons.LATENCY: "the latency targets", reasons.DEADLINE: "the deadline",
                     reasons.BUDGET: "the budget"}


def _each_alone(fitting: list[Option], kinds: list[str]) -> str:
    """Of several constraints nothing meets together: those no option meets even alone, with the nearest
    figure (relaxing only the others finds nothing), or that each alone is met by some option."""
    timed = [o for o in fitting if o.total_time_s is not None]
    alone = []
    for kind in kinds:
        if any(o.eligible or kind not in o.exclusion.kinds for o in timed):
            continue
        figure = ""
        if kind == reasons.DEADLINE and timed:
            figure = f" (the fastest takes {format_duration(min(o.total_time_s for o in timed))})"
        elif kind == reasons.BUDGET and timed:
            cheapest = min(timed, key=lambda o: o.total_cost_ranked)
            figure = f" (the cheapest costs {format_money(cheapest.total_cost_ranked, cheapest.ranking_currency)})"
        alone.append((_CONSTRAINT_WORDS[kind], figure))
    if not alone:
        return f"each alone is met by some option, not {'both' if len(kinds) == 2 else 'all'} at once"
    (words, figure), *rest = alone
    return f"no option meets {words} even alone{figure}" + "".join(f", nor {w}{f}" for w, f in rest)
