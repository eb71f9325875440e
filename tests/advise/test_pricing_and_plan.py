"""Cost advice on a small hand-made catalog: step-time scaling, cheaper GPUs after switching, the plan."""

import numpy as np
import pytest

from gpuwise.advise import AdviseSettings, Curve, PricingRequest, SwitchCost, TrainingLog, advise
from gpuwise.advise.gpu_plan import switch_saving
from gpuwise.plan.scaling import TimeScaling, time_scaling
from gpuwise.catalog.model import GPU, Catalog, Offer

from .curves import plateau_after, power_law


def _gpu(gpu_id: str, memory_gb: float, bandwidth_gbs: float, fp16_tflops: float) -> GPU:
    return GPU(id=gpu_id, name=gpu_id.upper(), arch="ampere", compute_capability="8.0", sm_count=80, cuda_cores=8192,
               tensor_cores=320, memory_bytes=int(memory_gb * 1e9), memory_bandwidth_gbs=bandwidth_gbs, l2_bytes=40 * 2**20,
               peak_tflops={"fp32": fp16_tflops / 8, "tf32": fp16_tflops / 2, "fp16": fp16_tflops, "bf16": fp16_tflops},
               tdp_w=300, pcie_gen=4, nvlink_gbs=None, source="test")


def _offer(gpu_id: str, price: float) -> Offer:
    return Offer(provider="testcloud", gpu_id=gpu_id, count=1, price_per_hour=price, currency="CNY", spot=False,
                 source="test", checked="2026-12-02")


BIG = _gpu("big", 80, 2000, 300)
HALF = _gpu("half", 24, 1000, 150)      # half the math and bandwidth: twice the step time
SMALL = _gpu("small", 12, 500, 75)      # a quarter: four times the step time
CATALOG = Catalog(gpus=(BIG, HALF, SMALL), offers=(_offer("big", 10.0), _offer("half", 3.0), _offer("small", 2.0)))


def test_without_a_workload_step_times_scale_by_the_datasheet_ratio():
    scaling = time_scaling("amp-bf16")
    assert scaling.ratio(BIG, BIG) == pytest.approx(1.0)
    assert scaling.ratio(BIG, HALF) == pytest.approx(2.0)
    assert scaling.ratio(BIG, SMALL) == pytest.approx(4.0)


def _plateau_log(step_time_s: float = 1.0) -> TrainingLog:
    s, y = plateau_after(300, n=1000)
    return TrainingLog(Curve(s, y, t_s=1e9 + step_time_s * s), gpu_name="big", peak_memory_bytes=20 * 10**9)


def test_plateau_lists_cheaper_gpus_with_the_saving_after_switching():
    switch = SwitchCost(restart_s=900, checkpoint_bytes=0)
    report = advise(_plateau_log(), AdviseSettings(total_steps=11_000), CATALOG,
                    PricingRequest(switch=switch, precision="amp-bf16"))
    assert report.diagnosis == "plateau"
    item = next(x for x in report.advice if x.kind == "switch_gpu")
    rows = {r["gpu"]: r for r in item.numbers["options"]}
    # 11,000 − 999 steps left: big 1 s/step at ¥10/h; half 2 s/step at ¥3/h, + 15 min of switching at ¥3/h
    left = 11_000 - 999
    assert item.numbers["remaining_steps"] == left
    assert item.numbers["stay"]["cost"] == pytest.approx(left * 10 / 3600)
    assert rows["half"]["cost"] == pytest.approx(left * 2 * 3 / 3600 + 0.25 * 3)
    assert rows["half"]["saving"] == pytest.approx(left * 10 / 3600 - left * 2 * 3 / 3600 - 0.25 * 3)
    assert "small" not in rows  # 12 GB < the 20 GB the run needs
    plan = report.plan
    assert [p.gpu_id for p in plan.phases] == ["half"] and plan.phases[0].from_step == 999
    assert plan.saving == pytest.approx(rows["half"]["saving"])
    assert report.to_dict()["plan"][0]["gpu"] == "half"


def test_a_descending_run_is_planned_to_switch_now_not_only_when_progress_gets_small():
    s, y = power_law(n=1000, noise=0.01)
    log = TrainingLog(Curve(s, y), gpu_name="big", peak_memory_bytes=10 * 10**9)
    switch = SwitchCost(restart_s=900, checkpoint_bytes=0)
    report = advise(log, AdviseSettings(step_time_s=1.0, total_steps=200_000), CATALOG, PricingRequest(switch=switch))
    assert report.diagnosis == "healthy"
    slows = min(x for x in (report.analysis.plateau_forecast_step, report.analysis.diminishing_returns_step) if x)
    assert 999 < slows < 200_000           # where the plan used to move, and the only move it priced
    (moved,) = report.plan.phases
    assert moved.gpu_id in ("half", "small") and moved.from_step == 999 == report.plan.switch_step
    cur, to = report.pricing.current, next(o for o in report.pricing.options if o.gpu == moved.gpu_id)
    assert report.plan.saving > switch_saving(cur, to, 200_000 - slows, switch) > 0   # now saves more than then
    assert any(x.kind == "plan" and x.title.endswith(" now") for x in report.advice)


def test_without_a_gpu_the_advice_says_what_to_pass():
    s, y = plateau_after(300)
    report = advise(TrainingLog(Curve(s, y)), AdviseSettings(), CATALOG, PricingRequest())
    assert report.plan is None
    assert "--gpu" in next(x.text for x in report.advice if x.kind == "switch_gpu")


@pytest.mark.parametrize(("peak_gb", "where"), [(10, "batch 64 on this GPU"), (16, "room for batch 64 in one step: big")])
def test_a_batch_far_below_the_noise_scale_gets_larger_batch_advice_with_prices(peak_gb, where):
    from gpuwise.advise import GradNoiseSamples

    n = 200
    g, tr, b_small, b_big = 1.0, 5000.0, 8, 32  # B_simple = 5000, batch 32
    samples = GradNoiseSamples(steps=np.arange(n), g_small_sq=np.full(n, g + tr / b_small),
                               g_big_sq=np.full(n, g + tr / b_big), b_small=np.full(n, b_small), b_big=np.full(n, b_big))
    s, y = power_law(n=n, noise=0.01)
    log = TrainingLog(Curve(s, y), noise=samples, gpu_name="half", peak_memory_bytes=peak_gb * 10**9)  # half: 24 GB
    report = advise(log, AdviseSettings(step_time_s=1.0), CATALOG, PricingRequest())
    ns = report.to_dict()["noise_scale"]
    assert ns["b_simple"] == pytest.approx(5000, rel=1e-6)
    assert ns["double_batch"]["steps_ratio"] == pytest.approx((1 + 5000 / 64) / (1 + 5000 / 32), abs=1e-4)
    item = next(x for x in report.advice if x.kind == "batch_size")
    assert item.title == "A larger batch pays off"
    assert "gradient accumulation" in item.text and "2 GPUs" in item.text and where in item.text


def test_step_times_elsewhere_come_from_the_one_time_scaling():
    calls = []

    def predicted(gpu):  # e.g. gpuwise.plan.step_time_function of the run's workload
        calls.append(gpu.id)
        return 1.0 if gpu.id == "big" else 3.0

    scaling = TimeScaling("time predictor", "test", "amp-fp16", predicted)
    report = advise(_plateau_log(), AdviseSettings(total_steps=5_000), CATALOG, PricingRequest(scaling=scaling))
    times = {o.gpu: o.step_time_s for o in report.pricing.options}
    assert times == {"big": pytest.approx(1.0), "half": pytest.approx(3.0), "small": pytest.approx(3.0)}
    assert {o.gpu: o.fits for o in report.pricing.options}["small"] is False  # listed, never chosen
    assert "half" in calls
