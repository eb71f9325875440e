"""The plan prices switching now as one of its moves, as the ``switch_gpu`` item does (``gpu_plan.finish_on``), so
the two give one answer. Before, on a still-falling run the plan only priced a move where the forecast says
progress slows: a healthy power-law run on an h100-sxm with --total-steps 7,000 (before that step) got "Plan: stay"
beside "Finish on rtx-3080-ti … Best: rtx-3080-ti, saving ¥4.53"; with --total-steps 30,000 it got "Plan: move to
rtx-3080-ti after step 7,019" (saving ¥27.27) while moving now saved ¥32.08."""

import numpy as np
import pytest

from gpuwise.advise.gpu_options import gpu_options
from gpuwise.advise.gpu_plan import SwitchCost, plan_run, switch_saving, worth_switching
from gpuwise.plan.scaling import time_scaling

from .test_pricing_and_plan import BIG, CATALOG

LAST_STEP = 3_000


def _power_law_csv(tmp_path):
    """loss = 1.2 + 3·t^-0.5 to step 3,000, logged every 10 steps, 0.3 s a step: still falling at its end."""
    steps = np.arange(10, LAST_STEP + 1, 10)
    path = tmp_path / "power_law.csv"
    path.write_text("step,loss,wall_time\n" + "".join(f"{s},{1.2 + 3 * s ** -0.5:.6f},{0.3 * s:.2f}\n" for s in steps))
    return path


@pytest.mark.parametrize("total_steps", [7_000, 30_000])
def test_a_falling_run_plans_the_switch_now_that_the_switch_item_calls_best(tmp_path, cli_json, total_steps):
    path = _power_law_csv(tmp_path)
    out = cli_json(["advise", str(path), "--gpu", "h100-sxm", "--total-steps", str(total_steps), "--json"])
    assert out["diagnosis"] == "healthy" and out["last_step"] == LAST_STEP
    (item,) = [x for x in out["advice"] if x["kind"] == "switch_gpu"]
    (plan,) = [x for x in out["advice"] if x["kind"] == "plan"]
    best = item["numbers"]["options"][0]
    assert best["saving"] >= item["numbers"]["min_saving"] > 0      # a switch now is worth it, by the one rule
    assert f"Best: {best['gpu']}" in item["text"]
    # the plan gives the same answer: that GPU, now, for that saving
    assert plan["title"] == f"Plan: move to {best['gpu']} now"
    assert [(p["gpu"], p["from_step"]) for p in out["plan"]] == [(best["gpu"], LAST_STEP)]
    summary = out["plan_summary"]
    assert summary["switch_step"] == LAST_STEP and summary["no_switch"] is None
    assert summary["saving"] == pytest.approx(best["saving"], abs=0.005)
    # the switch item, with its GPUs, comes before the plan that sums it up
    kinds = [x["kind"] for x in out["advice"]]
    assert kinds.index("switch_gpu") < kinds.index("plan")


def test_a_stay_plan_comes_with_no_switch_now_worth_making(tmp_path, cli_json):
    path = _power_law_csv(tmp_path)
    out = cli_json(["advise", str(path), "--gpu", "rtx-3080-ti", "--total-steps", "7000", "--json"])
    assert out["plan_summary"]["switch_step"] is None and [p["gpu"] for p in out["plan"]] == ["rtx-3080-ti"]
    assert out["plan_summary"]["no_switch"]
    assert not [x for x in out["advice"] if x["kind"] == "switch_gpu" and x["title"].startswith("Finish on")]


def _quotes():
    scaling = time_scaling("amp-bf16")
    return gpu_options(CATALOG, BIG, 1.0, scaling=scaling, memory_need_bytes=20 * 10**9)


@pytest.mark.parametrize("later_step", [2_000, 6_000, 11_000])
def test_plan_run_takes_the_move_now_which_saves_more_than_any_later(later_step):
    current, options = _quotes()
    switch = SwitchCost(restart_s=900, checkpoint_bytes=0)
    plan = plan_run(current, options, now_step=1_000, end_step=11_000, end_reason="test", switch=switch)
    half = next(o for o in options if o.gpu == "half")
    assert [(p.gpu_id, p.from_step) for p in plan.phases] == [("half", 1_000)] and plan.switch_step == 1_000
    assert plan.saving == switch_saving(current, half, 10_000, switch)   # one pricing path: equal to the last bit
    assert plan.saving > switch_saving(current, half, 11_000 - later_step, switch)   # more than moving later


def test_plan_run_stays_where_no_move_saves_what_a_switch_must():
    current, options = _quotes()
    switch = SwitchCost(restart_s=900, checkpoint_bytes=0)
    plan = plan_run(current, options, now_step=1_000, end_step=1_200, end_reason="test", switch=switch)
    half = next(o for o in options if o.gpu == "half")
    assert not worth_switching(switch_saving(current, half, 200, switch), plan.stay.cost, current.ranking_currency)
    assert plan.switch_step is None and plan.phases == (plan.stay,) and plan.saving == 0
