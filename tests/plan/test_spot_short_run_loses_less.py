"""A preemption loses the work since the last checkpoint: on a run shorter than one checkpoint interval that is
half the run on average, not half the interval. A 0.14 h spot job at the defaults (0.05 preemptions an hour, a
checkpoint every 30 min, 10 min to restart) was charged +2.1% (each preemption 15 min of lost work) where
0.05 × (4.2 min + 10 min) / 60 min = +1.2% is right.

The derivation (plan.spot's docstring): with checkpoints every I of work from the start, a preemption at work t
loses t mod I; preemptions fall anywhere in a run of T = k·I + r alike, so the mean loss is
(1/T)·∫₀ᵀ (t mod I) dt = (k·I²/2 + r²/2) / T. Checked here against that closed form, and against a small
seeded Monte-Carlo run of the process itself (preempt, lose the work since the checkpoint, restart, redo)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from gpuwise.plan.spot import SpotRisk

HOUR_S = 3600.0


def test_the_brief_short_job_is_charged_half_its_own_run_per_preemption():
    risk = SpotRisk()
    run_s = 0.14 * HOUR_S
    assert run_s < risk.checkpoint_interval_s
    added_share = risk.expected_time_s(run_s) / run_s - 1.0
    assert added_share == pytest.approx(risk.preemptions_per_hour * (run_s / 2 + risk.restart_s) / HOUR_S)
    assert added_share < risk.lost_share(1)        # the long-run share, half an interval lost each time


@pytest.mark.parametrize("run_intervals", [0.1, 0.5, 1.0, 1.5, 2.0, 3.25, 40.0])
def test_the_lost_work_is_the_mean_of_the_work_since_the_last_checkpoint(run_intervals):
    risk = SpotRisk(checkpoint_interval_s=1800.0)
    interval_s = risk.checkpoint_interval_s
    run_s = run_intervals * interval_s
    whole, rest_s = math.floor(run_intervals), (run_intervals - math.floor(run_intervals)) * interval_s
    assert risk.lost_work_s(run_s) == pytest.approx((whole * interval_s ** 2 / 2 + rest_s ** 2 / 2) / run_s)
    # the same mean by a midpoint sum of t mod I over the run
    n = 100_000
    midpoint_mean_s = statistics.fmean(((i + 0.5) * run_s / n) % interval_s for i in range(n))
    assert risk.lost_work_s(run_s) == pytest.approx(midpoint_mean_s, rel=1e-4)
    assert risk.lost_work_s(run_s) <= min(interval_s, run_s) / 2 + 1e-9
    assert risk.lost_share(1, run_s) <= risk.lost_share(1)


def test_a_run_of_whole_intervals_and_a_long_run_lose_half_an_interval():
    risk = SpotRisk()
    for run_s in (risk.checkpoint_interval_s, 4 * risk.checkpoint_interval_s):
        assert risk.lost_work_s(run_s) == pytest.approx(risk.checkpoint_interval_s / 2)
    assert risk.lost_work_s(1000 * risk.checkpoint_interval_s + 1.0) == pytest.approx(
        risk.checkpoint_interval_s / 2, rel=1e-3)
    assert SpotRisk(checkpoint_interval_s=0.0).lost_work_s(HOUR_S) == 0.0      # checkpointing as it goes


def simulated_wall_s(risk: SpotRisk, run_s: float, rng: random.Random) -> float:
    """One spot run of ``run_s`` of work on one machine: preempted at the risk's rate while it runs, each time back
    to the last checkpoint (every ``checkpoint_interval_s`` of work from the start) after ``restart_s``."""
    rate_per_s = risk.preemptions_per_hour / HOUR_S
    interval_s = risk.checkpoint_interval_s
    done_s = wall_s = 0.0
    while True:
        until_preempted_s = rng.expovariate(rate_per_s)
        if done_s + until_preempted_s >= run_s:
            return wall_s + run_s - done_s
        wall_s += until_preempted_s + risk.restart_s
        done_s = math.floor((done_s + until_preempted_s) / interval_s) * interval_s


@pytest.mark.parametrize("run_intervals", [0.3, 1.5])
def test_the_expected_time_matches_a_seeded_monte_carlo_of_the_preemptions(run_intervals):
    # twice the default rate, so that the runs see enough preemptions; low enough for the first-order rule
    risk = SpotRisk(preemptions_per_hour=0.1, checkpoint_interval_s=HOUR_S, restart_s=5 * 60.0)
    run_s = run_intervals * risk.checkpoint_interval_s
    rng = random.Random(20261120)
    added_s = [simulated_wall_s(risk, run_s, rng) - run_s for _ in range(100_000)]
    mean_s = statistics.fmean(added_s)
    standard_error_s = statistics.stdev(added_s) / math.sqrt(len(added_s))
    derived_s = risk.expected_time_s(run_s) - run_s
    # the rule is first order: the redone work, itself exposed to preemptions, adds rate × lost work of it more
    second_order_s = derived_s * risk.preemptions_per_hour * risk.lost_per_preemption_s(run_s) / HOUR_S
    assert abs(mean_s - derived_s) <= 4 * standard_error_s + second_order_s
    half_interval_s = run_s * risk.lost_share(1)         # the old rule: half an interval lost whatever the run
    assert abs(mean_s - half_interval_s) > 4 * standard_error_s + second_order_s
