"""A new user's third trial of `gpuwise advise`: each defect it found, as the behaviour now expected."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from gpuwise.advise import AdviseError, read_log


# 1 -------------------------------------------------------------------------------------------------------------
def _wandb_history(path, every: int = 10, last: int = 3000, step_time_s: float = 0.5, eval_every: int = 500):
    """A W&B history export of an HF Trainer run: ``_step`` counts logged rows (eval rows too),
    ``train/global_step`` is the optimizer step."""
    rows = ["_step,_runtime,_timestamp,train/loss,train/learning_rate,train/global_step,eval/loss"]
    row = 0
    for s in range(0, last, every):
        loss = 1 + 3 * (s + 10) ** -0.5
        rows.append(f"{row},{s * step_time_s},{1.7e9 + s * step_time_s},{loss:.5f},5e-5,{s},")
        row += 1
        if s % eval_every == 0:
            rows.append(f"{row},{s * step_time_s},{1.7e9 + s * step_time_s},,,{s},{loss + 0.1:.5f}")
            row += 1
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_wandb_export_is_read_on_the_trainers_global_step_not_wandbs_row_counter(tmp_path, cli_json):
    path = _wandb_history(tmp_path / "wb.csv")
    curve = read_log(path).curve
    assert list(curve.steps) == list(range(0, 3000, 10))
    assert curve.step_time_s() == pytest.approx(0.5)
    out = cli_json(["advise", str(path), "--gpu", "rtx-4090", "--total-steps", "3000", "--json"])
    assert out["last_step"] == 2990 and out["step_time_s"] == pytest.approx(0.5)


def test_wandbs_row_counter_is_the_step_only_when_the_log_has_no_other(tmp_path):
    path = tmp_path / "wb.csv"
    path.write_text("_step,train/loss\n" + "".join(f"{s},{2 - 0.01 * s}\n" for s in range(20)))
    assert list(read_log(path).curve.steps) == list(range(20))


# 3 -------------------------------------------------------------------------------------------------------------
def _trainer_state(path, last: int = 2000, every: int = 10, max_steps: int = 2000):
    history = []
    for s in range(every, last + 1, every):
        history.append({"epoch": s / 500, "grad_norm": 1.2, "learning_rate": 5e-5 * (1 - s / 4000),
                        "loss": round(2 + 3 * s ** -0.4, 4), "step": s})
        if s % 500 == 0:
            history.append({"epoch": s / 500, "eval_loss": 2.5, "eval_runtime": 3.2, "step": s})
    history.append({"epoch": 4.0, "step": last, "total_flos": 1e15, "train_loss": 2.3, "train_runtime": 1000.0})
    state = {"best_metric": None, "epoch": 4.0, "global_step": last, "log_history": history, "max_steps": max_steps}
    path.write_text(json.dumps(state, indent=2))
    return path


def test_hf_trainer_state_json_is_read_from_its_log_history_less_the_summary_row(tmp_path):
    log = read_log(_trainer_state(tmp_path / "trainer_state.json"))
    assert list(log.curve.steps) == list(range(10, 2001, 10))
    assert log.curve.loss[0] == pytest.approx(round(2 + 3 * 10 ** -0.4, 4))
    assert log.curve.lr[-1] == pytest.approx(5e-5 * 0.5)
    assert log.loss_name == "loss" and "train_loss" not in log.other_loss_names


def test_a_trainer_state_of_a_run_still_going_ends_at_its_max_steps(tmp_path, cli_json):
    path = _trainer_state(tmp_path / "trainer_state.json", last=1000, max_steps=5000)
    out = cli_json(["advise", str(path), "--json"])
    assert out["last_step"] == 1000
    assert max(p["step"] for p in out["forecast"]["points"]) == 5000


def test_a_json_file_of_json_lines_is_still_read_as_json_lines(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("".join(json.dumps({"step": s, "loss": 2 - 0.01 * s}) + "\n" for s in range(10)))
    assert list(read_log(path).curve.steps) == list(range(10))


def test_a_json_document_without_log_history_is_refused_in_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"lr": 1e-3, "layers": 12}, indent=2))
    with pytest.raises(AdviseError, match="log_history"):
        read_log(path)


# 4 -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "head", "cut"), [
    ("live.jsonl", "".join(json.dumps({"step": s, "loss": 2 - 0.01 * s}) + "\n" for s in range(10)), '{"step": 10, "lo'),
    ("live.jsonl", "".join(json.dumps({"step": s, "loss": 2 - 0.01 * s}) + "\n" for s in range(10)), '{"step": 10, "loss": 1.9'),
    ("live.csv", "step,loss,t_s\n" + "".join(f"{s},{2 - 0.01 * s},{1000 + s}\n" for s in range(10)), "10,1.9,1.0e"),
    ("live.csv", "step,loss,t_s\n" + "".join(f"{s},{2 - 0.01 * s},{1000 + s}\n" for s in range(10)), "10,1.9"),
])
def test_a_log_cut_mid_line_while_being_written_is_read_to_its_last_whole_line(tmp_path, caplog, name, head, cut):
    path = tmp_path / name
    path.write_text(head + cut)
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        curve = read_log(path).curve
    assert list(curve.steps) == list(range(10))
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{path}:{11 if name.endswith('.jsonl') else 12}:" in warning and "cut off" in warning


def test_a_cut_last_line_does_not_fail_the_command(tmp_path, cli_run):
    path = tmp_path / "live.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 2 - 0.01 * s}) + "\n" for s in range(10)) + '{"st')
    code, out, err = cli_run("advise", str(path))
    assert code == 0 and "points" in out and "cut off" in err


@pytest.mark.parametrize(("name", "text", "where"), [
    ("done.jsonl", '{"step": 1, "loss": 2.0}\n{"step": 2, "lo\n', ":2:"),           # ends with a newline
    ("mid.jsonl", '{"step": 1, "loss": 2.0}\n{"step": 2, "lo\n{"step": 3, "loss": 1.0}', ":2:"),
    ("done.csv", "step,loss,t_s\n1,2.0,1000\n2,1.9,1.0e\n", ":3:"),
    ("mid.csv", "step,loss,t_s\n1,2.0,1000\n2,1.9,1.0e\n3,1.8,1002", ":3:"),
])
def test_a_malformed_line_that_is_not_a_cut_last_line_stays_an_error(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(AdviseError) as err:
        read_log(path)
    assert f"{path}{where}" in str(err.value)


# 2 -------------------------------------------------------------------------------------------------------------
def _noise_scale_log(peak_memory_bytes: int | None):
    from gpuwise.advise import Curve, GradNoiseSamples, TrainingLog

    n, g, tr, b_small, b_big = 200, 1.0, 5000.0, 8, 32   # B_simple = 5000 against a batch of 32
    samples = GradNoiseSamples(steps=np.arange(n), g_small_sq=np.full(n, g + tr / b_small),
                               g_big_sq=np.full(n, g + tr / b_big), b_small=np.full(n, b_small), b_big=np.full(n, b_big))
    s = np.arange(n)
    y = 1.5 + 4.0 * (s + 1.0) ** -0.4 + np.random.default_rng(0).normal(0, 0.01, n)
    return TrainingLog(Curve(s, y), noise=samples, gpu_name="half", peak_memory_bytes=peak_memory_bytes)


def _mixed_currency_catalog():
    from gpuwise.catalog.model import GPU, Catalog, Offer

    def gpu(gpu_id, memory_gb, tflops):
        return GPU(id=gpu_id, name=gpu_id.upper(), arch="ampere", compute_capability="8.0", sm_count=80,
                   cuda_cores=8192, tensor_cores=320, memory_bytes=int(memory_gb * 1e9), memory_bandwidth_gbs=tflops * 7,
                   l2_bytes=40 * 2**20, peak_tflops={"fp32": tflops / 8, "tf32": tflops / 2, "fp16": tflops, "bf16": tflops},
                   tdp_w=300, pcie_gen=4, nvlink_gbs=None, source="test")

    def offer(gpu_id, price, currency, checked):
        return Offer(provider="testcloud", gpu_id=gpu_id, count=1, price_per_hour=price, currency=currency, spot=False,
                     source="test", checked=checked)

    return Catalog(gpus=(gpu("big", 80, 300), gpu("half", 24, 150)),
                   offers=(offer("big", 5.99, "USD", "2026-11-18"), offer("half", 3.0, "CNY", "2026-11-20")))


@pytest.mark.parametrize("peak_memory_bytes", [None, 16 * 10**9])
def test_larger_batch_advice_prices_everything_in_the_ranking_currency(peak_memory_bytes):
    from gpuwise.advise import AdviseSettings, PricingRequest, advise
    from gpuwise.plan.money import convert
    from gpuwise.units import format_money

    report = advise(_noise_scale_log(peak_memory_bytes), AdviseSettings(step_time_s=1.0), _mixed_currency_catalog(),
                    PricingRequest())
    (item,) = [x for x in report.advice if x.kind == "batch_size"]
    assert report.pricing.currency == "CNY" and "$" not in item.text
    assert f"{format_money(3.0, 'CNY')}/h" in item.text      # this GPU, in its own (the ranking) currency
    if peak_memory_bytes is not None:   # twice the 16 GB peak fits "big" only: its USD price, converted
        assert "big (74.5 GiB" in item.text and f"{format_money(convert(5.99, 'USD', 'CNY'), 'CNY')}/h" in item.text


def test_larger_batch_advice_claims_no_gpu_need_when_the_peak_memory_is_unknown():
    from gpuwise.advise import AdviseSettings, PricingRequest, advise

    report = advise(_noise_scale_log(None), AdviseSettings(step_time_s=1.0), _mixed_currency_catalog(), PricingRequest())
    (item,) = [x for x in report.advice if x.kind == "batch_size"]
    assert "room for batch" not in item.text and "big" not in item.text
    assert "peak memory was not measured" in item.text


# 5 -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("stride", "noise", "seed"), [(1, 0.0, 0), (10, 0.0, 0), (1, 0.02, 1), (10, 0.02, 2),
                                                       (10, 0.02, 3), (10, 0.05, 4)])
def test_the_divergence_step_is_where_the_raw_loss_turns_up_not_where_the_smoothed_trend_bottoms(stride, noise, seed):
    from gpuwise.advise import Curve, analyze_curve

    s = np.arange(1, 20_001, stride)
    loss = (0.5 + 5 * s**-0.3) * np.where(s > 16_000, np.exp((s - 16_000) / 1500), 1.0)
    loss = loss * (1 + np.random.default_rng(seed).normal(0, noise, len(s)))
    a = analyze_curve(Curve(steps=s, loss=loss))
    assert a.diagnosis == "diverged"
    assert 15_800 <= a.divergence_step <= 16_300     # before: 14,427 (the zero-phase EMA carried the rise back)
    assert a.phases[-1].kind == "rising" and a.phases[-1].start_step == a.divergence_step


# 6 -------------------------------------------------------------------------------------------------------------
DECREASING = {
    "power law": lambda s: 0.5 + 5 * s**-0.3,
    "power law near the plateau threshold": lambda s: 2 + s**-0.2,
    "exponential to a floor": lambda s: 0.5 + 2 * np.exp(-5 * s / s[-1]),
    "log-linear": lambda s: 3 - 0.2 * np.log(s),
}
SIZES = {"15 points": (1500, 100), "300 points": (300, 1), "2,000 points": (20_000, 10)}


@pytest.mark.parametrize("shape", DECREASING)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("noise", [0.01, 0.05, 0.15])
def test_a_loss_that_only_falls_never_gets_a_rising_phase_and_each_label_is_the_kind_its_number_names(shape, size, noise):
    from gpuwise.advise.phases import PhaseThresholds, RISING, detect_phases, kind_of

    n, stride = SIZES[size]
    s = np.arange(1, n + 1, stride).astype(float)
    for seed in range(3):
        loss = DECREASING[shape](s) * (1 + np.random.default_rng(seed).normal(0, noise, len(s)))
        phases = detect_phases(s, loss)
        assert RISING not in [p.kind for p in phases], (seed, phases)
        assert all(kind_of(p.drop_per_doubling, PhaseThresholds()) == p.kind for p in phases), (seed, phases)


def test_a_noisy_sparse_falling_stretch_is_not_called_rising(tmp_path, cli_json):
    # the trial's repro: steps 131-771 "rising, up ×2.5" while the bin medians fell 1.48 -> 1.22
    s = np.arange(1, 20_001, 10)
    loss = (0.5 + 5 * s**-0.3) * (1 + np.random.default_rng(21).normal(0, 0.15, len(s)))
    path = tmp_path / "npl.csv"
    path.write_text("step,loss\n" + "".join(f"{a},{b:.5f}\n" for a, b in zip(s, loss)))
    out = cli_json(["advise", str(path), "--json"])
    assert "rising" not in [p["kind"] for p in out["phases"]]
    for p in out["phases"]:    # each phase's sign is the way its raw loss went, or it is flat
        inside = loss[(s >= p["start_step"]) & (s <= p["end_step"])]
        third = max(1, len(inside) // 3)
        fell = np.median(inside[-third:]) < np.median(inside[:third])
        assert p["kind"] == "plateau" or fell == (p["drop_per_doubling"] > 0), p


def test_a_power_law_with_one_percent_noise_does_not_flicker_between_slow_descent_and_plateau():
    from gpuwise.advise.phases import detect_phases

    s = np.arange(1, 20_001, 10).astype(float)
    for seed in range(3):
        loss = (2 + s**-0.2) * (1 + np.random.default_rng(seed).normal(0, 0.01, len(s)))
        kinds = [p.kind for p in detect_phases(s, loss)]
        assert len(kinds) <= 3, kinds   # before: up to 6 phases, slow descent and plateau taking turns


def test_a_real_rise_is_still_a_rising_phase():
    from gpuwise.advise.phases import RISING, detect_phases

    s = np.arange(1, 3001).astype(float)
    for seed in range(3):
        loss = np.where(s < 1500, 1 + 3 * s**-0.5, (1 + 3 * 1500**-0.5) * (s / 1500) ** 0.5)
        loss = loss * (1 + np.random.default_rng(seed).normal(0, 0.02, len(s)))
        phases = detect_phases(s, loss)
        assert phases[-1].kind == RISING and 1200 <= phases[-1].start_step <= 1800, phases


# 7 -------------------------------------------------------------------------------------------------------------
def test_advise_says_when_prices_and_exchange_rates_were_checked(tmp_path, cli_json, cli_run):
    from gpuwise.plan.money import RATES_CHECKED

    path = _wandb_history(tmp_path / "wb.csv")
    out = cli_json(["advise", str(path), "--gpu", "rtx-4090", "--json"])
    assert out["exchange_rates"]["checked"] == RATES_CHECKED and out["ranking_currency"] == out["gpu"]["ranking_currency"]
    assert out["prices_checked"] and all(len(d) == 10 for d in out["prices_checked"])
    code, text, _ = cli_run("advise", str(path), "--gpu", "rtx-4090")
    flat = " ".join(text.split())
    assert code == 0 and f"exchange rates indicative as of {RATES_CHECKED}" in flat
    assert f"checked {', '.join(out['prices_checked'])}" in flat


def test_a_price_in_another_currency_than_the_offers_says_they_were_converted(tmp_path, cli_json):
    out = cli_json(["advise", str(_wandb_history(tmp_path / "wb.csv")), "--gpu", "rtx-4090", "--gpu-price", "12EUR",
                    "--provider", "autodl", "--json"])
    assert out["ranking_currency"] == "EUR"
    assert {o["currency"] for o in out["gpu_options"]} >= {"CNY"}
    assert "prices in CNY converted to EUR" in out["pricing_note"]


def test_the_memory_item_lists_the_gpus_a_run_fits_cheapest_first_by_its_own_totals(tmp_path, cli_json):
    s = np.arange(0, 1000)
    loss = 0.5 + 2.0 * np.exp(-np.minimum(s, 300) / 60.0) + np.random.default_rng(0).normal(0, 0.02, len(s))
    path = tmp_path / "plateau.csv"
    path.write_text("step,loss,t_s\n" + "".join(f"{a},{b:.6g},{1.7e9 + 0.5 * a}\n" for a, b in zip(s, loss)))
    out = cli_json(["advise", str(path), "--gpu", "rtx-4090", "--peak-memory", "30GB", "--total-steps", "1200",
                    "--json"])
    (memory,) = [x for x in out["advice"] if x["kind"] == "memory"]
    costs = [r["cost"] for r in memory["numbers"]["options"]]
    assert len(costs) > 2 and costs == sorted(costs)
