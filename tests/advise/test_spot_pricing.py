"""`advise --spot` prices a spot offer as `recommend --spot` does: its steps' time plus the expected preemptions
(``plan.spot.SpotRisk``), billed at the spot price, and says the added time."""

import json

import pytest

from gpuwise.advise import AdviseSettings, Curve, PricingRequest, SwitchCost, TrainingLog, advise
from gpuwise.catalog.model import GPU, Catalog, Offer
from gpuwise.plan.quote import make_quote
from gpuwise.plan.spot import SpotRisk

from .curves import plateau_after


def _gpu(gpu_id: str, memory_gb: float, bandwidth_gbs: float, fp16_tflops: float) -> GPU:
    return GPU(id=gpu_id, name=gpu_id.upper(), arch="ampere", compute_capability="8.0", sm_count=80, cuda_cores=8192,
               tensor_cores=320, memory_bytes=int(memory_gb * 1e9), memory_bandwidth_gbs=bandwidth_gbs,
               l2_bytes=40 * 2**20,
               peak_tflops={"fp32": fp16_tflops / 8, "tf32": fp16_tflops / 2, "fp16": fp16_tflops, "bf16": fp16_tflops},
               tdp_w=300, pcie_gen=4, nvlink_gbs=None, source="test")


BIG = _gpu("big", 80, 2000, 300)
HALF = _gpu("half", 24, 1000, 150)      # half the math and bandwidth: twice the step time
ON_DEMAND_BIG = Offer(provider="testcloud", gpu_id="big", count=1, price_per_hour=10.0, currency="CNY", spot=False,
                      source="test", checked="2026-12-02")
SPOT_HALF = Offer(provider="testcloud", gpu_id="half", count=1, price_per_hour=2.0, currency="CNY", spot=True,
                  source="test", checked="2026-12-02")
CATALOG = Catalog(gpus=(BIG, HALF), offers=(ON_DEMAND_BIG, SPOT_HALF))
SWITCH = SwitchCost(restart_s=900, checkpoint_bytes=0)


def _plateau_report(total_steps: int = 11_000):
    s, y = plateau_after(300, n=1000)
    log = TrainingLog(Curve(s, y, t_s=1e9 + 1.0 * s), gpu_name="big", peak_memory_bytes=20 * 10**9)
    return advise(log, AdviseSettings(total_steps=total_steps), CATALOG,
                  PricingRequest(switch=SWITCH, precision="amp-bf16", spot=True))


def _recommend_cost(offer: Offer, gpu: GPU, steps: int, step_time_s: float) -> float:
    """What recommend bills for ``steps`` on one machine of a spot ``offer`` (plan/recommend.py ``_evaluate``): the
    expected time under the default SpotRisk, priced by ``make_quote``."""
    expected_s = SpotRisk().expected_time_s(steps * step_time_s, machines=1)
    return make_quote(gpu, 1, offer, peak_total_bytes=None, step_time_s=step_time_s, headroom_fraction=0.05,
                      ranking_currency="CNY", total_time_s=expected_s).total_cost_ranked


def test_spot_phase_of_the_plan_costs_what_recommend_bills_for_the_same_steps():
    report = _plateau_report()
    moved = report.plan.phases[-1]
    assert moved.gpu_id == "half"
    steps = moved.to_step - moved.from_step
    half = next(o for o in report.pricing.options if o.gpu == "half")
    expected = _recommend_cost(SPOT_HALF, HALF, steps, half.step_time_s)
    assert expected > steps * half.step_time_s / 3600 * SPOT_HALF.price_per_hour   # preemptions cost something
    assert moved.cost - moved.switch_cost == pytest.approx(expected, rel=1e-9)
    assert moved.spot
    added_h = SpotRisk().expected_time_s(steps * half.step_time_s) / 3600 - steps * half.step_time_s / 3600
    assert moved.preemption_hours == pytest.approx(added_h, rel=1e-9)
    assert moved.hours == pytest.approx(steps * half.step_time_s / 3600 + added_h + SWITCH.overhead_s / 3600)


def test_switch_advice_rows_and_texts_say_the_expected_preemptions_of_a_spot_offer():
    report = _plateau_report()
    (switch,) = [x for x in report.advice if x.kind == "switch_gpu"]
    (row,) = switch.numbers["options"]
    steps = switch.numbers["remaining_steps"]
    half = next(o for o in report.pricing.options if o.gpu == "half")
    assert row["spot"] and row["preemption_hours"] > 0
    assert row["cost"] == pytest.approx(_recommend_cost(SPOT_HALF, HALF, steps, half.step_time_s)
                                        + SWITCH.cost(half), rel=1e-9)
    assert "half (testcloud, spot)" in switch.text and "of it expected preemptions" in switch.text
    (plan,) = [x for x in report.advice if x.kind == "plan"]
    assert "of it expected preemptions" in plan.text
    assert plan.numbers["preemption_hours"] == pytest.approx(report.plan.phases[-1].preemption_hours)
    assert "0.05 per hour assumed" in report.pricing.spot_note


def test_on_demand_options_carry_no_preemptions():
    report = _plateau_report()
    assert report.plan.stay.preemption_hours == 0.0 and not report.plan.stay.spot
    big = report.pricing.current
    assert report.plan.stay.cost == pytest.approx(big.ranked_cost_for(report.plan.stay.to_step
                                                                       - report.plan.stay.from_step))


def _run(cli_run, argv) -> str:
    """stdout of ``gpuwise ARGV`` (the shared ``cli_run`` fixture), asserting it exits 0."""
    code, out, err = cli_run(*argv)
    assert code == 0, err
    return out


def test_advise_cli_says_the_preemption_time_and_the_assumed_rate(tmp_path, cli_run):
    s, y = plateau_after(300, n=1000)
    csv = tmp_path / "plateau.csv"
    csv.write_text("step,loss,t_s\n" + "".join(f"{i},{v:.6g},{1.7e9 + 0.8 * i}\n" for i, v in zip(s, y)))
    argv = ["advise", str(csv), "--gpu", "a100-80gb-sxm4", "--provider", "gcp", "--spot", "--peak-memory", "10GB",
            "--total-steps", "20000"]
    plan = json.loads(_run(cli_run, argv + ["--json"]))["plan"]
    spot_phases = [p for p in plan if p["spot"]]
    assert spot_phases and all(p["preemption_hours"] > 0 for p in spot_phases)
    out = " ".join(_run(cli_run, argv).split())
    assert "of it expected preemptions" in out
    assert "0.05 per hour assumed on each machine" in out and "(spot)" in out
