"""What a spot (interruptible) offer really costs: its price plus the time lost to preemptions.

A preemption loses the work since the last checkpoint and the time to get a new machine and resume
(``restart_s``). Preemptions arrive at ``preemptions_per_hour`` on each machine while the job runs, and a job
over ``m`` spot machines stops when any one of them is reclaimed. The work lost, with gpuwise's guard
checkpointing every ``I = checkpoint_interval_s`` of work from the start: a preemption falls anywhere in a run of
``T = k·I + r`` (``0 <= r < I``) alike, at ``t``, and loses ``t mod I``, so on average
``(k·I²/2 + r²/2) / T`` (``SpotRisk.lost_work_s``): half an interval on a run of whole intervals or a long one,
half the run on one shorter than an interval (a 0.14 h run preempted loses 4.2 min, not 15), never more than
``I/2``. To first order (the redone work is not itself preempted), a job of ``T`` hours takes
``T + m × rate × (T × restart + k·I²/2 + r²/2)``, which is ``T × (1 + m × rate × (I/2 + restart))`` on a long
run, and costs that × the spot price. The rate is an assumption (providers publish ranges, not rates: AWS's
Spot Instance Advisor buckets GPU instances from "<5 %" to ">20 %" interruptions per month, and community clouds
are less stable); the output says which rate was assumed, and ``--preemptions-per-hour`` changes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.plan.errors import PlanError
from gpuwise.units import format_duration, format_money

DEFAULT_PREEMPTIONS_PER_HOUR = 0.05      # one in 20 h: an assumption, stated in every answer that uses it
DEFAULT_CHECKPOINT_INTERVAL_S = 30 * 60.0
DEFAULT_RESTART_S = 10 * 60.0            # a new machine, the container, reading the checkpoint back
MAX_PREEMPTIONS_PER_HOUR = 60.0          # one a minute: past that no step finishes between preemptions
MAX_INTERVAL_S = 7 * 24 * 3600.0         # a week between checkpoints, or to restart


@dataclass(frozen=True)
class SpotRisk:
    preemptions_per_hour: float = DEFAULT_PREEMPTIONS_PER_HOUR
    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S
    restart_s: float = DEFAULT_RESTART_S

    def __post_init__(self) -> None:
        for name, value, most in (("--preemptions-per-hour", self.preemptions_per_hour, MAX_PREEMPTIONS_PER_HOUR),
                                  ("--checkpoint-every", self.checkpoint_interval_s, MAX_INTERVAL_S),
                                  ("restart time", self.restart_s, MAX_INTERVAL_S)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise PlanError(f"{name} must be a finite number >= 0, got {value!r}")
            if value > most:
                raise PlanError(f"{name} must be at most {most:g}, got {value:g}: no spot job runs at that")

    def lost_work_s(self, run_time_s: float | None = None) -> float:
        """The work one preemption loses on average over a run of ``run_time_s`` (None: a run long against the
        checkpoint interval): what was done since the last checkpoint, ``(k·I²/2 + r²/2) / T`` for a run of
        ``T = k·I + r`` (module docstring), at most half an interval and at most half the run."""
        interval_s = self.checkpoint_interval_s
        if run_time_s is None or interval_s == 0:
            return interval_s / 2.0
        if run_time_s <= 0:
            return 0.0
        whole_intervals, rest_s = divmod(run_time_s, interval_s)
        return (whole_intervals * interval_s ** 2 + rest_s ** 2) / (2.0 * run_time_s)

    def lost_per_preemption_s(self, run_time_s: float | None = None) -> float:
        """The time one preemption costs a run of ``run_time_s`` (None: a long one): its lost work and the restart."""
        return self.lost_work_s(run_time_s) + self.restart_s

    def lost_share(self, machines: int = 1, run_time_s: float | None = None) -> float:
        """The share of the run time that preemptions add on ``machines`` spot machines: each is reclaimed at
        ``preemptions_per_hour``, and any one's preemption stops the whole job (a multi-node run restarts).
        ``run_time_s``: the run's own length (a run shorter than a few intervals loses less each time); None: a
        long run, the most any run adds."""
        if machines < 1:
            raise PlanError(f"a spot job runs on at least one machine, got {machines}")
        return machines * self.preemptions_per_hour * self.lost_per_preemption_s(run_time_s) / 3600.0

    def expected_time_s(self, run_time_s: float, machines: int = 1) -> float:
        """Expected wall time of ``run_time_s`` of work on ``machines`` spot machines."""
        return run_time_s * (1.0 + self.lost_share(machines, run_time_s))

    def describe(self, machines: tuple[int, ...] = (1,)) -> str:
        """The assumption in words; ``machines``: the machine counts of the spot options quoted (2 machines of 8
        GPUs are preempted twice as often as one), each with its added share."""
        more = sorted(set(machines) - {1})
        added = ", ".join([f"+{self.lost_share(1):.1%} time and cost"] * (1 in machines or not more)
                          + [f"+{self.lost_share(m):.1%} on {m} machines" for m in more])
        return (f"spot offers are priced with expected preemptions: {self.preemptions_per_hour:g} per hour assumed "
                f"on each machine, each losing the work since the last checkpoint, half a checkpoint interval on "
                f"average and half the run on a shorter one ({format_duration(self.checkpoint_interval_s)} between "
                f"checkpoints), and {format_duration(self.restart_s)} to restart (up to {added})")


def describe_serving(risk: SpotRisk) -> str:
    """What a preemption costs a server (``--request-rate``): no checkpoint is lost; the replica's requests in
    flight are dropped (their clients retry) and it is gone until a new machine has loaded the weights."""
    down = risk.preemptions_per_hour * risk.restart_s / 3600.0
    return (f"spot offers: {risk.preemptions_per_hour:g} preemptions per hour assumed; each drops the requests in "
            f"flight on that replica and takes it away for about {format_duration(risk.restart_s)} (a new machine, "
            f"loading the weights), {down:.1%} of the time: the others carry its load meanwhile, or keep one "
            "replica on demand (the cost per hour is the spot price)")


def spot_outcome(options, best, provider: str | None) -> str:
    """What ``--spot`` changed, in one sentence: which spot offer (if any) is the best, or why none is
    (the providers asked have none, or the cheapest spot option still costs more than ``best``).
    ``options``: the recommendation's quote rows; ``best``: its best option (None: nothing meets)."""
    spot = [o for o in options if o.spot]
    where = f"at {provider}" if provider else "in the catalog"
    if not spot:
        return f"--spot: no spot offers {where} for these GPUs, so the options are the on-demand ones"
    if best is not None and best.spot:
        return f"--spot: the best option is a spot offer ({best.count}× {best.gpu} from {best.provider})"
    eligible = [o for o in spot if o.eligible and o.total_cost_ranked is not None]
    if not eligible:
        return (f"--spot: {len(spot)} spot offer(s) {where} ({', '.join(sorted({o.provider for o in spot}))}), "
                "none of which fits or meets the constraints")
    cheapest = min(eligible, key=lambda o: o.total_cost_ranked)
    said = (f"--spot: {len(spot)} spot offer(s) {where}; the cheapest that meets the constraints, "
            f"{cheapest.count}× {cheapest.gpu} from {cheapest.provider}, costs "
            f"{format_money(cheapest.total_cost_ranked, cheapest.ranking_currency or '')} with preemptions")
    if best is not None and best.total_cost_ranked is not None:
        said += f", more than the best on-demand option's {format_money(best.total_cost_ranked, best.ranking_currency or '')}"
    return said
