"""A GPU plan for the rest of a run: which GPU for which steps, with the cost against staying put.

Why switch at all: while the loss falls fast, wall time buys progress and a fast GPU earns its
price; once progress per hour is small, only the price per step matters, and a cheaper GPU finishes
the tail for less. A switch costs time on the new GPU before the first useful step (save, move the
checkpoint, restart, warm up), billed at the new GPU's price. A spot offer's phase takes (and is billed) its
expected preemptions too, by recommend's rule (``gpu_options.expected_hours_for``). A switch is advised only
where it saves what it is worth (``worth_switching``): a few cents for half an hour more of wall time is no saving.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwise.advise.gpu_options import SPOT_RISK, expected_cost_for, expected_hours_for, preemption_hours_for
from gpuwise.plan.money import convert
from gpuwise.plan.quote import Quote
from gpuwise.plan.spot import SpotRisk


# A switch is worth advising where it saves at least this share of what staying costs ...
MIN_SAVING_SHARE = 0.05
# ... or at least this amount (converted to the ranking currency): a saving under both is no saving, only a restart,
# a moved checkpoint and more wall time (an rtx-4090 run "saved ¥0.00" finishing on an rtx-3080-ti, 43 min slower).
MIN_SAVING_AMOUNT, MIN_SAVING_CURRENCY = 1.0, "USD"


def min_switch_saving(stay_cost: float, currency: str) -> float:
    """The least a switch must save, in ``currency``, where staying costs ``stay_cost``: ``MIN_SAVING_SHARE`` of
    that, or ``MIN_SAVING_AMOUNT`` ``MIN_SAVING_CURRENCY`` where that is less."""
    return min(MIN_SAVING_SHARE * stay_cost, convert(MIN_SAVING_AMOUNT, MIN_SAVING_CURRENCY, currency))


def worth_switching(saving: float, stay_cost: float, currency: str) -> bool:
    """Whether a switch saving ``saving`` (switching counted) against ``stay_cost`` is worth advising: the one rule
    for the switch advice, its "Best:" and the plan."""
    return saving > 0 and saving >= min_switch_saving(stay_cost, currency)


@dataclass(frozen=True)
class SwitchCost:
    """Restart overhead on the new GPU: ``restart_s`` plus moving ``checkpoint_bytes`` at ``transfer_bytes_per_s``."""

    restart_s: float = 900.0
    checkpoint_bytes: float = 5e9
    transfer_bytes_per_s: float = 100e6

    @property
    def overhead_s(self) -> float:
        return self.restart_s + self.checkpoint_bytes / self.transfer_bytes_per_s

    def cost(self, option: Quote) -> float:
        """In the ranking currency, at the new GPU's price."""
        return option.price_per_hour_ranked * self.overhead_s / 3600.0


@dataclass(frozen=True)
class PlanPhase:
    from_step: int
    to_step: int
    gpu_id: str
    provider: str
    hours: float
    cost: float
    switch_cost: float = 0.0   # included in ``cost``
    spot: bool = False
    preemption_hours: float = 0.0   # a spot offer's expected preemptions, included in ``hours`` (and ``cost``)

    def to_dict(self) -> dict:
        return {"from_step": self.from_step, "to_step": self.to_step, "gpu": self.gpu_id, "provider": self.provider,
                "hours": round(self.hours, 3), "cost": round(self.cost, 2), "switch_cost": round(self.switch_cost, 2),
                "spot": self.spot, "preemption_hours": round(self.preemption_hours, 3)}


@dataclass(frozen=True)
class GpuPlan:
    phases: tuple[PlanPhase, ...]
    stay: PlanPhase                 # the whole rest on the current GPU
    currency: str
    end_step: int
    end_reason: str

    @property
    def cost(self) -> float:
        return sum(p.cost for p in self.phases)

    @property
    def hours(self) -> float:
        return sum(p.hours for p in self.phases)

    @property
    def preemption_hours(self) -> float:
        """The spot phases' expected preemptions, included in ``hours``."""
        return sum(p.preemption_hours for p in self.phases)

    @property
    def saving(self) -> float:
        return self.stay.cost - self.cost


def switch_saving(current: Quote, other: Quote, remaining_steps: float, switch: SwitchCost,
                  risk: SpotRisk = SPOT_RISK) -> float:
    """Money saved by finishing ``remaining_steps`` on ``other`` instead of ``current`` (negative: it costs); a spot
    offer's steps with the preemptions ``risk`` expects."""
    return (expected_cost_for(current, remaining_steps, risk) - expected_cost_for(other, remaining_steps, risk)
            - switch.cost(other))


def plan_run(current: Quote, options: list[Quote], *, now_step: int, switch_step: int, end_step: int,
             end_reason: str, switch: SwitchCost = SwitchCost(), risk: SpotRisk = SPOT_RISK) -> GpuPlan:
    """Stay on ``current`` until ``switch_step``, then move to the option that saves most on the rest, where that
    saving is worth a switch (``worth_switching``, against staying to ``end_step``); a spot offer's phase takes the
    preemptions ``risk`` expects."""
    now_step = int(now_step)
    end_step = max(int(end_step), now_step)
    switch_step = min(max(int(switch_step), now_step), end_step)
    stay = _phase(current, now_step, end_step, risk)
    tail = end_step - switch_step
    candidates = [o for o in options if o.gpu != current.gpu and o.fits is not False]
    best = max(candidates, key=lambda o: switch_saving(current, o, tail, switch, risk), default=None)
    saving = switch_saving(current, best, tail, switch, risk) if best is not None else 0.0
    if tail <= 0 or not worth_switching(saving, stay.cost, current.ranking_currency):
        return GpuPlan((stay,), stay, current.ranking_currency, end_step, end_reason)
    phases = []
    if switch_step > now_step:
        phases.append(_phase(current, now_step, switch_step, risk))
    moved = _phase(best, switch_step, end_step, risk)
    phases.append(replace(moved, hours=moved.hours + switch.overhead_s / 3600.0, cost=moved.cost + switch.cost(best),
                          switch_cost=switch.cost(best)))
    return GpuPlan(tuple(phases), stay, current.ranking_currency, end_step, end_reason)


def _phase(option: Quote, from_step: int, to_step: int, risk: SpotRisk) -> PlanPhase:
    steps = to_step - from_step
    return PlanPhase(from_step, to_step, option.gpu, option.provider, expected_hours_for(option, steps, risk),
                     expected_cost_for(option, steps, risk), spot=option.spot,
                     preemption_hours=preemption_hours_for(option, steps, risk))
