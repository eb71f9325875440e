"""Sixth trial: a 40-step run still falling 6 % a step (0.188 -> 0.123 over steps 34-40, 84 % per doubling) was
"plateau: 0.8 % of what the run has gained; the loss itself falls 83.6 % per doubling"; an eval loss that rose 50 %
beside a flat training loss was not reported (the overfitting rule needs the training loss to fall); a CSV whose
time column is ``wall`` or W&B's ``_runtime`` read no step time ("pass --step-time-s")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuwise.advise import read_log
from gpuwise.advise import advise as run_advise
from gpuwise.advise.analysis import analyze_curve
from gpuwise.advise.phases import FAST, PLATEAU, SLOW, PhaseThresholds, progress_factor
from gpuwise.cli.app import main

from .curves import curve

# ---------------------------------------------------------------- a fast-falling tail is no plateau

TAIL_RATE_PER_STEP = np.log(0.188 / 0.123) / 6      # the trial's tail: 0.188 at step 34, 0.123 at step 40


def _short_fast_run(seed: int, start_loss: float = 20.0, first_tau_steps: float = 3.0):
    """40 steps: a plunge from ``start_loss`` in the first few steps, then a loss still falling 6-7 % a step."""
    rng = np.random.default_rng(seed)
    s = np.arange(0, 41)
    clean = start_loss * np.exp(-s / first_tau_steps) + 0.188 * np.exp(-TAIL_RATE_PER_STEP * (s - 34))
    return s, clean * np.exp(rng.normal(0, 0.05, len(s)))


def _own_drop_per_doubling(steps, loss, s0: int, s1: int) -> float:
    return float(1 - (loss[s1] / loss[s0]) ** (np.log(2) / np.log(steps[s1] / steps[s0])))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("start_loss", [20.0, 40.0])
def test_a_short_run_whose_loss_still_falls_by_most_of_itself_per_doubling_is_no_plateau(seed, start_loss, tmp_path):
    s, y = _short_fast_run(seed, start_loss)
    assert _own_drop_per_doubling(s, y, 34, 40) > 0.5                  # the tail more than halves per doubling
    path = tmp_path / "short.csv"
    path.write_text("step,loss\n" + "".join(f"{a},{b:.6f}\n" for a, b in zip(s, y)))
    report = run_advise(read_log(path))
    last = report.analysis.phases[-1]
    # a descent, never flat: slow by the share of the gain it buys, whatever its own log-slope says
    assert last.kind in (FAST, SLOW) and last.drop_per_doubling >= PhaseThresholds().plateau_drop_per_doubling
    assert report.diagnosis != "plateau"
    assert not any(x.kind in ("plateau", "stop") for x in report.advice)


def test_the_share_of_the_gain_is_read_only_where_the_loss_itself_falls_by_less_than_half_per_doubling():
    level, head = np.array([0.123, 0.123, 0.123]), 20.0
    drop = np.array([0.84, 0.5, 0.3])
    share = 0.123 / (20.0 - 0.123)
    plateau = PhaseThresholds().plateau_drop_per_doubling
    factor = progress_factor(level, head, drop)
    # halving or faster: never flat (scaled to no less than the plateau threshold), and no more than that where
    # the gain's share reads it as slow (the two measures disagree: a slow descent, not a fast one)
    assert (drop[:2] * factor[:2] >= plateau).all() and (drop[:2] * factor[:2] < 2 * plateau).all()
    assert factor[2] == pytest.approx(share)
    # a steep drop that noise could have made (its low end under half) keeps the gain's reading
    noisy = progress_factor(level, head, drop, sure_drop=np.array([0.1, 0.6, 0.1]))
    assert noisy[0] == pytest.approx(share) and drop[1] * noisy[1] >= plateau


def test_a_loss_levelling_off_near_zero_is_flat_from_where_it_stops_halving_per_doubling():
    # the towards-zero curve of tests/advise/curves.py without noise: 2.3 -> a floor of 0.012
    s = np.arange(1, 801)
    clean = 0.012 + 2.3 * np.exp(-s * 5.0 / 350)
    a = analyze_curve(curve(s, clean))
    last = a.phases[-1]
    assert last.kind == PLATEAU
    own_at = lambda t: 1 - 2 ** (-(t * 5.0 / 350) * (2.3 * np.exp(-t * 5.0 / 350)) / (0.012 + 2.3 * np.exp(-t * 5.0 / 350)))  # noqa: E731
    assert own_at(last.start_step) < 0.5 <= own_at(0.8 * last.start_step)


# ---------------------------------------------------------------- an eval loss rising beside a flat training loss


def _flat_train_rising_eval(tmp_path, seed: int, eval_rise: float = 0.5, train_fall: float = 0.0):
    """3,000 steps; the training loss flat at 0.8 (±2 % noise) from step 300, less ``train_fall`` of it by the end;
    an eval every 100 steps, down to 1.0 by step 1,000, then up by ``eval_rise`` of it by step 2,900."""
    rng = np.random.default_rng(seed)
    lines = ["step,loss,eval_loss"]
    for step in range(0, 3000, 10):
        train = 0.8 + 2.0 * np.exp(-step / 40) - 0.8 * train_fall * max(0, step - 1000) / 2000
        train *= 1 + rng.normal(0, 0.02)
        ev = ""
        if step % 100 == 90:
            level = 1.0 + 0.2 * max(0, 1000 - step) / 1000 + eval_rise * max(0, step - 1000) / 1900
            ev = f"{level + rng.normal(0, 0.01):.5f}"
        lines.append(f"{step},{train:.5f},{ev}")
    path = tmp_path / f"eval_rise_{seed}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("seed", range(4))
def test_an_eval_loss_up_half_beside_a_flat_training_loss_is_said_in_one_line(tmp_path, capsys, seed):
    path = _flat_train_rising_eval(tmp_path, seed)
    report = run_advise(read_log(path))
    assert report.overfitting is None                     # the training loss did not fall: no overfitting
    rise = report.eval_rising
    assert rise is not None and 800 <= rise.since_step <= 1200     # evals every 100 steps, the turn at 1,000
    assert 0.4 <= rise.eval_rise_fraction <= 0.6
    item = report.advice[0]
    assert item.kind == "eval_rising" and "did not fall" in item.text
    assert report.to_dict()["eval_rising"]["since_step"] == rise.since_step
    with pytest.raises(SystemExit) as done:
        main(["advise", str(path)])
    out = capsys.readouterr().out
    assert not done.value.code
    said = [line for line in out.splitlines() if line.startswith("Eval loss rising:")]
    assert len(said) == 1 and f"{rise.eval_rise_fraction:.0%}" in said[0] and f"step {rise.since_step:,}" in said[0]


def test_an_eval_loss_rising_while_the_training_loss_falls_stays_overfitting_not_both(tmp_path):
    report = run_advise(read_log(_flat_train_rising_eval(tmp_path, 0, train_fall=0.2)))
    assert report.overfitting is not None and report.eval_rising is None
    assert [x.kind for x in report.advice].count("overfitting") == 1
    assert not any(x.kind == "eval_rising" for x in report.advice)


def test_a_flat_eval_loss_beside_a_flat_training_loss_says_nothing_of_either(tmp_path):
    d = run_advise(read_log(_flat_train_rising_eval(tmp_path, 0, eval_rise=0.0))).to_dict()
    assert d["eval_rising"] is None and d["overfitting"] is None
    assert not any(x["kind"] in ("eval_rising", "overfitting") for x in d["advice"])


# ---------------------------------------------------------------- time columns as the loggers name them

STEP_TIME_S = 0.5
UNIX_START_S = 1.7e9


@pytest.mark.parametrize("column", ["wall", "wall_time", "time_s", "elapsed", "elapsed_time", "timestamp",
                                    "_runtime", "_timestamp", "time", "Wall time", "wall_clock"])
@pytest.mark.parametrize("origin_s", [0.0, UNIX_START_S])   # seconds since the start, or a Unix time
def test_a_time_column_under_any_loggers_name_gives_the_step_time(tmp_path, column, origin_s):
    path = tmp_path / "log.csv"
    path.write_text(f"step,loss,{column}\n"
                    + "".join(f"{s},{2.0 * (s + 1) ** -0.3:.5f},{origin_s + STEP_TIME_S * s:.1f}\n" for s in range(200)))
    assert read_log(path).curve.step_time_s() == pytest.approx(STEP_TIME_S)


def test_a_wandb_export_reads_its_runtime_and_keeps_global_step_over_its_row_counter(tmp_path, capsys):
    path = tmp_path / "wandb_export.csv"
    rows = [f"{2 * s},{s},{2.0 * (s + 1) ** -0.3:.5f},{0.25 * s:.2f}" for s in range(0, 400, 2)]
    path.write_text("_step,train/global_step,train/loss,_runtime\n" + "\n".join(rows) + "\n")
    log = read_log(path)
    assert log.curve.steps[-1] == 398 and log.curve.step_time_s() == pytest.approx(0.25)
    with pytest.raises(SystemExit):
        main(["advise", str(path), "--json"])
    assert json.loads(capsys.readouterr().out)["step_time_s"] == pytest.approx(0.25)


def test_a_jsonl_log_with_wall_iso_times_gives_the_step_time(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 2.0 * (s + 1) ** -0.3,
                                        "wall": f"2026-01-01T00:{s // 60:02d}:{s % 60:02d}Z"}) + "\n" for s in range(0, 240, 2)))
    assert read_log(path).curve.step_time_s() == pytest.approx(1.0)
