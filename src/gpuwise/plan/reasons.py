"""Why an option is left out, as a value: a kind code reads (``Exclusion.kind``) and the words people
read (``Exclusion.text``), made here, once per kind. Before this, code parsed the prose back
(``split(":")``, ``"does not split evenly" in``) and a reworded sentence changed behaviour."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.plan.batch_split import splitting_batch
from gpuwise.plan.money import convert
from gpuwise.units import format_duration, format_money

CANNOT_RUN = "cannot-run"      # the GPU cannot run the job's precision (no bf16 ...)
COUNT = "count"                # the job cannot be split over this many GPUs (tensor-parallel heads ...)
SPLIT = "split"                # the effective batch does not split evenly over the GPUs
OOM = "oom"                    # the step does not fit, its estimate's total included
OOM_RISK = "oom-risk"          # the estimate's total fits, its upper side does not
LATENCY = "latency"            # a serving target (--ttft, --tpot) is missed
DEADLINE = "deadline"          # the job ends after --deadline
BUDGET = "budget"              # the job costs more than --budget
KINDS = (CANNOT_RUN, COUNT, SPLIT, OOM, OOM_RISK, LATENCY, DEADLINE, BUDGET)


@dataclass(frozen=True)
class Exclusion:
    kind: str
    text: str
    # the further constraints the option misses (latency, deadline, budget), all said in ``text`` too: an
    # option over the budget that also misses the deadline must say both (relaxing one finds nothing)
    also: tuple[str, ...] = ()
    # out of memory: the weights alone are more than the GPU holds for them, so no smaller batch fits either
    weights_alone: bool = False

    def __post_init__(self) -> None:
        for kind in self.kinds:
            if kind not in KINDS:
                raise ValueError(f"unknown exclusion kind {kind!r} (one of {', '.join(KINDS)})")

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every kind the option is left out for, ``kind`` first."""
        return (self.kind, *self.also)

    def __str__(self) -> str:
        return self.text


def cannot_run(reason: str) -> Exclusion:
    """``plan.profile.cannot_run``'s reason (the one rule estimate shows too, word for word)."""
    return Exclusion(CANNOT_RUN, reason)


def count_refused(reason: str) -> Exclusion:
    return Exclusion(COUNT, reason)


def batch_does_not_split(effective: int, count: int, micro_batch: int) -> Exclusion:
    """--batch-size is the micro-batch; the effective batch is what every option keeps: say which flag
    runs the job on this count: ``splitting_batch``'s, the batch the split-batch remedy prices too."""
    over = splitting_batch(effective, count)
    return Exclusion(SPLIT, f"effective batch {effective} does not split evenly over {count} GPUs "
                            f"(--effective-batch {over} splits {over // count} per GPU, "
                            f"--per-gpu-batch runs micro-batch {micro_batch} on each)")


def out_of_memory(batch: int, needs: str, usable: str, *, risk: bool, weights_alone: bool = False) -> Exclusion:
    """The fit line's words: ``needs`` the estimate's total to its upper side, ``usable`` the memory it was judged
    against as every fit line says it (``memory.uncertainty.usable_words``: '14.2 GiB usable with 5% of its 15.0 GiB
    kept free'); ``risk`` where the total itself fits and only the upper side does not; ``weights_alone`` where the
    weights by themselves are more than that memory."""
    return Exclusion(OOM_RISK if risk else OOM,
                     f"{'OOM risk' if risk else 'OOM'} at batch {batch}: needs {needs}, {usable}",
                     weights_alone=weights_alone)


def no_kv_room(shortfall: str, *, weights_alone: bool = False) -> Exclusion:
    """vLLM: its reservation does not hold the KV cache of the sequences to serve (``VllmCapacity.shortfall``);
    ``weights_alone`` where the weights by themselves are more than the reservation."""
    return Exclusion(OOM, shortfall, weights_alone=weights_alone)


def latency_missed(misses: list[str]) -> Exclusion:
    return Exclusion(LATENCY, "; ".join(misses))


def deadline_missed(over_s: float) -> Exclusion:
    return Exclusion(DEADLINE, f"misses the deadline by {format_duration(over_s)}")


def over_budget(over: float, currency: str, budget_currency: str | None = None) -> Exclusion:
    """``over`` in ``currency``, the ranking one (as the costs beside it are), then in the budget's currency where
    the user gave another, each to the digits that show it (never "by $0.00")."""
    said = format_money(over, currency, nonzero=True)
    if budget_currency is not None and budget_currency != currency:
        said += f" ({format_money(convert(over, currency, budget_currency), budget_currency, nonzero=True)})"
    return Exclusion(BUDGET, f"over budget by {said}")


def constraints_missed(misses: list[Exclusion]) -> Exclusion:
    """One exclusion for every constraint an option misses (``latency_missed``, ``deadline_missed``,
    ``over_budget``, in that order): the first one's kind, the others in ``also``, all in the words."""
    first, *rest = misses
    if not rest:
        return first
    return Exclusion(first.kind, "; ".join(m.text for m in misses), tuple(m.kind for m in rest))
