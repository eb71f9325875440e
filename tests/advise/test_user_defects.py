"""Defects a new user found: an unreachable target dated, ±0.0 % noise on a short log, a sentence twice."""

from __future__ import annotations

import numpy as np
from gpuwise.advise.analysis import AdviseSettings, analyze_curve
from gpuwise.advise.advice import forecast_advice, plateau_advice
from gpuwise.advise.advice import Pricing
from gpuwise.cli.app import main

from .curves import curve


def _floored_power_law(seed: int = 0, n: int = 3000):
    """loss = 0.8 + 2.5·t^-0.6 + 2 % noise: it never goes below 0.8 (log-linear fitted 93 % before)."""
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1).astype(float)
    return s, 0.8 + 2.5 * s**-0.6 + rng.normal(0, 0.02, n)


def test_target_below_the_floor_is_not_reached_and_plateau_agrees_with_progress():
    s, loss = _floored_power_law()
    a = analyze_curve(curve(s, loss), AdviseSettings(target_loss=0.7, step_time_s=0.25))
    assert a.diagnosis == "plateau"
    est = a.steps_to_target
    assert est is not None and est.step is None and est.high is None   # was step 11,614,418 (log-linear)
    assert 0.75 < est.floor < 0.85
    text = forecast_advice(a, 0.7)[0].text
    assert f"not reached (the curve levels off near {est.floor:.4g})" in text and "reached near step" not in text
    # the progress-per-hour step comes from the same floored curve: the truth is ~28k, log-linear said 126k
    assert 10_000 < a.diminishing_returns_step < 60_000
    assert np.isfinite(a.fit.asymptote())
    plateau_text = plateau_advice(a, Pricing(None), 0, "")[0].text
    assert f"until step {a.diminishing_returns_step:,}" in plateau_text


def test_reachable_target_on_a_floored_curve_still_gets_a_step():
    s, loss = _floored_power_law()
    a = analyze_curve(curve(s, loss), AdviseSettings(target_loss=0.815, step_time_s=0.25))
    assert a.steps_to_target is not None and a.steps_to_target.step is not None


def test_short_noisy_log_shows_its_noise():
    rng = np.random.default_rng(3)
    s = np.arange(1, 31).astype(float)
    loss = (1.0 + 1.5 * s**-0.7) * (1 + rng.normal(0, 0.15, 30))
    a = analyze_curve(curve(s, loss))
    assert a.noise.relative_std > 0.05   # was 0.0: the 2 % span on 30 points is no smoothing at all


def test_scaling_sentence_printed_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    s, loss = _floored_power_law(n=400)
    p = tmp_path / "loss.csv"
    p.write_text("step,loss\n" + "".join(f"{int(i)},{v:.5f}\n" for i, v in zip(s, loss)))
    try:
        main(["advise", str(p), "--gpu", "rtx-4090", "--provider", "autodl", "--step-time-s", "0.25",
              "--total-steps", "5000"])
    except SystemExit as exc:
        assert not exc.code
    out = capsys.readouterr().out
    assert out.lower().count("step times on other gpus") == 1, out


def test_an_nvidia_smi_log_given_to_advise_is_pointed_to_report():
    # it listed the 14 GPU-metric columns and asked for a 'loss' column
    import subprocess
    import sys
    from pathlib import Path

    smi = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "advise", str(smi)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "`gpuwise report` reads it" in r.stderr


def _plunge(seed: int, n: int = 1500):
    """~25 for 3 steps, then flat at 0.01 with ±60 % noise: fast at first, flat later."""
    rng = np.random.default_rng(seed)
    s = np.arange(0, n).astype(float)
    return s, np.where(s < 3, 25.0, 0.01) * np.exp(rng.normal(0, 0.6, n))


def test_a_loss_that_plunges_in_a_few_steps_and_stays_flat_says_where_it_flattened():
    # before: "plateau ... flat since step 0", one phase over the whole log, on 10 of 40 such curves
    from gpuwise.advise.phases import FAST, PLATEAU, detect_phases

    for seed in range(20):
        phases = detect_phases(*_plunge(seed))
        assert phases[0].kind == FAST and phases[0].drop_per_doubling > 0.5, (seed, phases)
        assert phases[1].kind == PLATEAU and 3 <= phases[1].start_step <= 10, (seed, phases)


def test_a_flat_run_is_told_what_stopping_saves_over_the_steps_it_would_still_pay_for(tmp_path, capsys, cli_json):
    # before: the plan priced all 18,501 remaining steps and said nothing of stopping
    s, loss = _plunge(10)
    p = tmp_path / "loss.csv"
    p.write_text("step,loss\n" + "".join(f"{int(i)},{v:.6f}\n" for i, v in zip(s, loss)))
    out = cli_json(["advise", str(p), "--gpu", "a100-80gb-sxm4", "--provider", "autodl", "--step-time-s", "0.5",
                    "--total-steps", "20000", "--json"])
    (stop,) = [x for x in out["advice"] if x["kind"] == "stop"]
    n = stop["numbers"]
    assert n["stop_step"] == 1499 and n["saved_steps"] == 20000 - 1499
    assert abs(n["saved_hours"] - 18501 * 0.5 / 3600) < 1e-9
    # the saving is what staying would have cost for those steps: the plan's own "stay" row
    assert abs(n["saving"] - out["plan_summary"]["stay"]["cost"]) < 0.01 and n["saving"] > 0


def test_a_target_that_sets_no_end_is_not_told_to_be_passed(tmp_path):
    # a new user's trial: `advise loss.csv --gpu rtx-4090 --target-loss 0.5` said the target is not reached, then
    # "(assumed: as many steps again; pass --total-steps or --target-loss)" although --target-loss was passed
    import os
    import subprocess
    import sys

    s = np.arange(0, 1200, 10)
    loss = 1.0 + 2.0 * np.exp(-s / 200.0) + 0.01 * np.sin(s)
    path = tmp_path / "loss.csv"
    path.write_text("step,loss\n" + "".join(f"{a},{b:.4f}\n" for a, b in zip(s, loss)))

    def advise(*extra: str) -> str:
        r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "advise", str(path), "--gpu", "rtx-4090",
                            "--step-time-s", "0.5", *extra], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "400"})
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout + r.stderr

    unreached = advise("--target-loss", "0.5")
    assert "The target 0.5 is not reached" in unreached
    assert "or --target-loss" not in unreached
    assert "as the forecast does not reach the target loss 0.5; pass --total-steps" in unreached
    reached = advise("--target-loss", "1.5")
    assert "or --target-loss" not in reached and "as the target loss 1.5 was reached at step" in reached
    # without a target the hint still names both ways to set the end
    assert "(assumed: as many steps again; pass --total-steps or --target-loss)" in advise()
