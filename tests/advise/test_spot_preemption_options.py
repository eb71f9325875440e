"""`advise --spot` takes recommend's spot assumption (``--preemptions-per-hour``, ``--checkpoint-every``) and prices
every spot row with it, by recommend's one rule (``plan.spot.SpotRisk``). Before, advise had neither option: a
renter on a community cloud preempted once an hour was priced at one preemption in 20 h."""

import json

import pytest

from gpuwise.advise import AdviseSettings, Curve, PricingRequest, TrainingLog, advise
from gpuwise.plan.quote import make_quote
from gpuwise.plan.spot import SpotRisk

from .curves import plateau_after
from .test_spot_pricing import CATALOG, HALF, SPOT_HALF, SWITCH

HOURLY = SpotRisk(preemptions_per_hour=1.0, checkpoint_interval_s=2 * 3600.0)


def _report(risk: SpotRisk):
    s, y = plateau_after(300, n=1000)
    log = TrainingLog(Curve(s, y, t_s=1e9 + 1.0 * s), gpu_name="big", peak_memory_bytes=20 * 10**9)
    return advise(log, AdviseSettings(total_steps=11_000), CATALOG,
                  PricingRequest(switch=SWITCH, precision="amp-bf16", spot=True, spot_risk=risk))


def _recommend_cost(risk: SpotRisk, steps: int, step_time_s: float) -> float:
    """What recommend bills for ``steps`` on one spot machine under ``risk`` (plan/recommend.py ``_evaluate``)."""
    expected_s = risk.expected_time_s(steps * step_time_s, machines=1)
    return make_quote(HALF, 1, SPOT_HALF, peak_total_bytes=None, step_time_s=step_time_s, headroom_fraction=0.05,
                      ranking_currency="CNY", total_time_s=expected_s).total_cost_ranked


def test_the_plan_and_the_switch_rows_price_spot_at_the_given_preemption_rate():
    report = _report(HOURLY)
    half = next(o for o in report.pricing.options if o.gpu == "half")
    moved = report.plan.phases[-1]
    assert moved.gpu_id == "half" and moved.spot
    steps = moved.to_step - moved.from_step
    assert moved.cost - moved.switch_cost == pytest.approx(_recommend_cost(HOURLY, steps, half.step_time_s), rel=1e-9)
    run_h = steps * half.step_time_s / 3600
    assert moved.preemption_hours == pytest.approx(HOURLY.expected_time_s(run_h * 3600) / 3600 - run_h, rel=1e-9)
    (switch,) = [x for x in report.advice if x.kind == "switch_gpu"]
    (row,) = switch.numbers["options"]
    remaining = switch.numbers["remaining_steps"]
    assert row["cost"] == pytest.approx(_recommend_cost(HOURLY, remaining, half.step_time_s) + SWITCH.cost(half),
                                        rel=1e-9)
    assert "1 per hour assumed" in report.pricing.spot_note and "2.0 h between checkpoints" in report.pricing.spot_note


def test_a_higher_preemption_rate_costs_more_than_the_default():
    default, hourly = _report(SpotRisk()), _report(HOURLY)
    assert hourly.plan.phases[-1].preemption_hours > 10 * default.plan.phases[-1].preemption_hours
    assert hourly.plan.saving < default.plan.saving


def _csv(tmp_path):
    s, y = plateau_after(300, n=1000)
    path = tmp_path / "plateau.csv"
    path.write_text("step,loss,t_s\n" + "".join(f"{i},{v:.6g},{1.7e9 + 0.8 * i}\n" for i, v in zip(s, y)))
    return path


BASE = ["--gpu", "a100-80gb-sxm4", "--provider", "gcp", "--spot", "--peak-memory", "10GB", "--total-steps", "20000"]


def test_advise_cli_takes_recommends_preemption_options(tmp_path, cli_run):
    argv = ["advise", str(_csv(tmp_path)), *BASE]
    hourly_argv = [*argv, "--preemptions-per-hour", "1", "--checkpoint-every", "2h"]
    plans = []
    for args in (argv, hourly_argv):
        code, out, err = cli_run(*args, "--json")
        assert code == 0, err
        plans.append({(p["gpu"], p["from_step"], p["to_step"]): p for p in json.loads(out)["plan"] if p["spot"]})
    default, hourly = plans
    assert default.keys() & hourly.keys()
    for key in default.keys() & hourly.keys():   # the same spot steps lose the rule's share of their run time
        assert hourly[key]["preemption_hours"] / default[key]["preemption_hours"] == pytest.approx(
            HOURLY.lost_share(1) / SpotRisk().lost_share(1), rel=0.02)
    code, text, err = cli_run(*hourly_argv)
    assert code == 0, err
    assert "1 per hour assumed on each machine" in " ".join(text.split())


@pytest.mark.parametrize("option, value, said", [("--preemptions-per-hour", "-1", "--preemptions-per-hour must be"),
                                                 ("--preemptions-per-hour", "100", "at most 60"),
                                                 ("--checkpoint-every", "3x", "--checkpoint-every")])
def test_bad_preemption_options_are_one_line_exit_2(tmp_path, cli_run, option, value, said):
    code, out, err = cli_run("advise", str(_csv(tmp_path)), *BASE, option, value)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1
