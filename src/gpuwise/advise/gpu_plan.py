"""A GPU plan for the rest of a run: which GPU for which steps, with the cost against staying put.

Why switch at all: a cheaper GPU finishes steps for less. A switch costs time on the new GPU before the first useful
step (save, move the checkpoint, restart, warm up), billed at the new GPU's price. A spot offer's phase takes (and
is billed) its expected preemptions too, by recommend's rule (``gpu_options.expected_hours_for``). The plan is the
cheapest of staying, moving now and moving where the forecast says progress slows, each move priced as the
``switch_gpu`` item prices finishing on that GPU (``finish_on``, one pricing path), so the plan and that item never
name two answers. A switch is advised only where it saves what it is worth (``worth_switching``): a few cents for
half an hour more of wall time is no saving.
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

    @property
    def switch_step(self) -> int | None:
        """The step the plan moves to another GPU at (None: it stays)."""
        moved = [p.from_step for p in self.phases if p.gpu_id != self.stay.gpu_id]
        return moved[0] if moved else None


def finish_on(option: Quote, from_step: float, to_step: float, risk: SpotRisk = SPOT_RISK,
              switch: SwitchCost | None = None) -> PlanPhase:
    """The steps from ``from_step`` to ``to_step`` on ``option``: wall hours and cost in the ranking currency (a
    spot offer's expected preemptions under ``risk`` included, their hours apart), with a switch to it where
    ``switch`` is given, its time and cost both (at ``option``'s price). The one price of a plan's phase and of a
    ``switch_gpu`` row."""
    steps = to_step - from_step
    switch_s = switch.overhead_s if switch is not None else 0.0
    switch_cost = switch.cost(option) if switch is not None else 0.0
    return PlanPhase(from_step, to_step, option.gpu, option.provider,
                     expected_hours_for(option, steps, risk) + switch_s / 3600.0,
                     expected_cost_for(option, steps, risk) + switch_cost, switch_cost=switch_cost, spot=option.spot,
                     preemption_hours=preemption_hours_for(option, steps, risk))


def switch_saving(current: Quote, other: Quote, remaining_steps: float, switch: SwitchCost,
                  risk: SpotRisk = SPOT_RISK) -> float:
    """Money saved by finishing ``remaining_steps`` on ``other`` instead of ``current`` (negative: it costs); a spot
    offer's steps with the preemptions ``risk`` expects. The saving of the plan that moves to ``other`` now."""
    return finish_on(current, 0, remaining_steps, risk).cost - finish_on(other, 0, remaining_steps, risk, switch).cost


def plan_run(current: Quote, options: list[Quote], *, now_step: int, end_step: int, end_reason: str,
             switch: SwitchCost = SwitchCost(), risk: SpotRisk = SPOT_RISK) -> GpuPlan:
    """The cheapest plan to ``end_step``: staying on ``current``, or moving now to another option the run may fit; a
    move only where its saving against staying is worth a switch (``worth_switching``). Prices are per hour, so a
    move saves the most the sooner it is made (its saving falls by the price difference of every step it waits,
    spot offers' preemptions included, which are a share of the steps): no later move is a candidate. On equal
    savings the option listed first wins, as the ``switch_gpu`` item's "Best:" picks; a spot offer's phase takes
    the preemptions ``risk`` expects."""
    now_step = int(now_step)
    end_step = max(int(end_step), now_step)
    stay_phase = finish_on(current, now_step, end_step, risk)
    stay = GpuPlan((stay_phase,), stay_phase, current.ranking_currency, end_step, end_reason)
    if now_step >= end_step:
        return stay
    moves = [replace(stay, phases=(finish_on(o, now_step, end_step, risk, switch),))
             for o in options if o.gpu != current.gpu and o.fits is not False]
    best = max(moves, key=lambda p: p.saving, default=None)
    if best is None or not worth_switching(best.saving, stay_phase.cost, current.ranking_currency):
        return stay
    return best
