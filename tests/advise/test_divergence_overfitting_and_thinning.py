"""A new user's fourth trial of `gpuwise advise`: each defect it found, as the behaviour now expected."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuwise.advise import Curve, TrainingLog, advise, analyze_curve, read_log
from gpuwise.advise import downsample
from gpuwise.advise.errors import AdviseError


# 1 -------------------------------------------------------------------------------------------------------------
def _diverging(path):
    """Healthy to step 1,800, then 5 % higher a step from 1,801, NaN/inf from 1,901 (the trial's diverge.csv)."""
    rng = np.random.default_rng(0)
    s = np.arange(1, 2001)
    loss = (1.0 + 3 * s**-0.4 * (1 + rng.normal(0, 0.02, len(s)))).astype(object)
    loss[1800:1900] = [1.3 * 1.05**k for k in range(100)]
    loss[1900:] = ["nan"] * 50 + ["inf"] * 50
    path.write_text("step,loss\n" + "".join(f"{a},{b}\n" for a, b in zip(s, loss)))
    return path


def test_a_run_that_runs_away_then_goes_nan_restarts_from_its_last_good_step_in_text_and_json(tmp_path, cli_json):
    out = cli_json(["advise", str(_diverging(tmp_path / "d.csv")), "--json"])
    assert out["nan_step"] == 1901 and 1790 <= out["divergence_step"] <= 1800
    item = next(x for x in out["advice"] if x["kind"] == "diverged")
    step = out["divergence_step"]
    assert item["numbers"]["step"] == step and item["numbers"]["nan_step"] == 1901
    assert f"at or before step {step:,}" in item["text"] and "before step 1,901" not in item["text"]
    assert "NaN/inf at step 1,901" in item["text"]      # still said, but not as where to restart


# 2 -------------------------------------------------------------------------------------------------------------
def _overfit_series():
    s = np.arange(0, 3000, 10)
    train = 0.2 + 2 * (1 + s / 50) ** -0.8 * (1 + np.random.default_rng(1).normal(0, 0.01, len(s)))
    ev = np.where(s % 100 == 0, 1.0 + 1.5 * (1 + s / 50) ** -1 + 0.0002 * s, np.nan)
    return s, train, ev


def _overfit_csv(path):
    s, tr, ev = _overfit_series()
    path.write_text("step,train_loss,eval_loss\n"
                    + "".join(f"{a},{b},{'' if np.isnan(c) else c}\n" for a, b, c in zip(s, tr, ev)))
    return path


def _overfit_jsonl(path):
    s, tr, ev = _overfit_series()
    lines = []
    for a, b, c in zip(s, tr, ev):
        lines.append(json.dumps({"step": int(a), "loss": float(b)}))
        if not np.isnan(c):
            lines.append(json.dumps({"step": int(a), "eval_loss": float(c)}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("write", [_overfit_csv, _overfit_jsonl], ids=["csv", "hf-jsonl"])
def test_an_eval_loss_rising_while_the_train_loss_falls_is_overfitting(tmp_path, cli_json, cli_run, write):
    path = write(tmp_path / ("o.csv" if write is _overfit_csv else "o.jsonl"))
    out = cli_json(["advise", str(path), "--json"])
    o = out["overfitting"]
    assert o is not None and out["eval_loss_series"] == "eval_loss" and o["eval_series"] == "eval_loss"
    assert 400 <= o["since_step"] <= 700 and o["eval_loss_now"] > 1.5 and o["train_trend_now"] < o["train_trend_at_best_eval"]
    assert out["advice"][0]["kind"] == "overfitting"
    assert "early" in out["advice"][0]["text"] and "regularis" in out["advice"][0]["text"]
    code, text, _ = cli_run("advise", str(path))
    assert code == 0 and f"eval loss rising since step {o['since_step']:,} while train loss falls" in " ".join(text.split())


def test_a_tensorboard_eval_loss_tag_is_read_beside_the_training_loss(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    s, tr, ev = _overfit_series()
    with SummaryWriter(log_dir=str(tmp_path / "run")) as w:
        for a, b, c in zip(s, tr, ev):
            w.add_scalar("train/loss", float(b), int(a))
            if not np.isnan(c):
                w.add_scalar("eval/loss", float(c), int(a))
    report = advise(read_log(tmp_path / "run"))
    assert report.eval_name == "eval/loss" and report.overfitting is not None
    assert 400 <= report.overfitting.since_step <= 700


@pytest.mark.parametrize("kind", ["falling", "noisy flat"])
def test_an_eval_loss_that_falls_or_only_wobbles_is_not_overfitting(kind):
    s, tr, _ = _overfit_series()
    es = s[::10]
    rng = np.random.default_rng(2)
    ev = 1.0 + 1.5 * (1 + es / 50) ** -1 if kind == "falling" else 1.3 + rng.normal(0, 0.01, len(es))
    log = TrainingLog(curve=Curve(steps=s, loss=tr), eval_curve=Curve(steps=es, loss=ev), eval_name="eval_loss")
    report = advise(log)
    assert report.overfitting is None and report.to_dict()["overfitting"] is None
    assert all(x.kind != "overfitting" for x in report.advice)


def test_a_slowly_rising_eval_loss_read_as_the_loss_is_a_rising_phase_not_a_divergence(tmp_path, cli_json):
    out = cli_json(["advise", str(_overfit_csv(tmp_path / "o.csv")), "--loss-tag", "eval_loss", "--json"])
    assert out["diagnosis"] != "diverged" and out["divergence_step"] is None
    assert out["phases"][-1]["kind"] == "rising" and 400 <= out["phases"][-1]["start_step"] <= 800
    assert out["phases"][0]["kind"] in ("fast_descent", "slow_descent")
    texts = " ".join(x["text"] for x in out["advice"])
    assert "rising since step" in texts and "clip gradients" not in texts
    assert out["forecast"] == {"available": False, "reason": "the loss is rising"}


def test_an_unknown_loss_tag_lists_the_eval_losses_it_would_accept_too(tmp_path, cli_run):
    code, _, err = cli_run("advise", str(_overfit_csv(tmp_path / "o.csv")), "--loss-tag", "nope")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "'train_loss', 'eval_loss'" in err


# 3 -------------------------------------------------------------------------------------------------------------
def _long(path, n: int, bad: dict[int, str]):
    rows = [f"{s},{bad.get(s, 1.5 + 4 * s ** -0.3)}" for s in range(1, n + 1)]
    path.write_text("step,loss\n" + "\n".join(rows) + "\n")
    return path


def test_non_finite_losses_are_counted_before_a_long_log_is_thinned(tmp_path, monkeypatch, cli_json):
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", 100)     # thinning from 200 bins on: 1,000 rows are long
    skip = cli_json(["advise", str(_long(tmp_path / "s.csv", 1000, {501: "inf"})), "--json"])
    assert skip["skipped_nonfinite"] == {"count": 1, "steps": [501]} and skip["nan_step"] is None   # before: 0
    tail = cli_json(["advise", str(_long(tmp_path / "n.csv", 1002, {1001: "nan", 1002: "nan"})), "--json"])
    assert tail["nan_step"] == 1001 and tail["skipped_nonfinite"]["count"] == 0                       # before: 1002
    assert skip["thinned"]["rows_read"] == 1000 and skip["thinned"]["bin_steps"] > 1


def test_the_header_says_a_long_log_was_thinned(tmp_path, monkeypatch, cli_run, cli_json):
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", 100)
    path = _long(tmp_path / "l.csv", 1000, {})
    code, out, _ = cli_run("advise", str(path))
    assert code == 0 and "thinned on read from 1,000 rows" in " ".join(out.split())
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", 20_000)
    assert cli_json(["advise", str(path), "--json"])["thinned"] is None


# 4 -------------------------------------------------------------------------------------------------------------
def test_tensorboards_download_csv_is_read_without_a_loss_tag(tmp_path):
    path = tmp_path / "run-train-tag-loss.csv"
    path.write_text("Step,Value,Wall time\n" + "".join(f"{s},{2 + 1 / s},{1.7e9 + s}\n" for s in range(1, 60)))
    log = read_log(path)
    assert log.loss_name == "Value" and list(log.curve.steps) == list(range(1, 60))
    assert log.curve.step_time_s() == pytest.approx(1.0)


def test_a_tensorboard_csv_export_of_another_scalar_is_not_read_as_a_loss(tmp_path):
    # from the review: an accuracy or learning-rate export has the same three columns; its file name says its tag
    rows = "Step,Value,Wall time\n" + "".join(f"{s},{1 - 1 / s},{1.7e9 + s}\n" for s in range(1, 60))
    for name in ("run-train-tag-accuracy.csv", "run-.-tag-train_lr.csv"):
        (tmp_path / name).write_text(rows)
        with pytest.raises(AdviseError, match="no loss; --loss-tag Value reads it as one anyway"):
            read_log(tmp_path / name)
        assert read_log(tmp_path / name, "Value").loss_name == "Value"
    (tmp_path / "run-.-tag-eval_loss.csv").write_text(rows)          # an eval loss is a loss
    assert read_log(tmp_path / "run-.-tag-eval_loss.csv").loss_name == "Value"
    (tmp_path / "mine.csv").write_text(rows)                          # renamed: nothing says otherwise
    assert read_log(tmp_path / "mine.csv").loss_name == "Value"


# 5 -------------------------------------------------------------------------------------------------------------
def test_one_finite_loss_value_is_said_in_the_singular():
    with pytest.raises(AdviseError, match=r"\(1 finite loss value;"):
        analyze_curve(Curve(steps=np.array([0]), loss=np.array([1.0])))


@pytest.mark.parametrize("decayed", [True, False])
def test_no_learning_rate_drop_is_suggested_when_the_logged_rate_has_already_decayed(decayed):
    rng = np.random.default_rng(0)
    s = np.arange(0, 2000)
    loss = 0.5 + 2.0 * np.exp(-np.minimum(s, 400) / 60.0) + rng.normal(0, 0.01, len(s))
    lr = 3e-4 * 0.5 * (1 + np.cos(np.pi * s / 2000)) if decayed else np.full(len(s), 3e-4)
    report = advise(TrainingLog(curve=Curve(steps=s, loss=loss, lr=lr)))
    item = next(x for x in report.advice if x.kind == "plateau")
    assert ("×0.1" in item.text) is not decayed
    assert ("already decayed" in item.text) is decayed and item.numbers["lr_decayed"] is decayed


@pytest.mark.parametrize("jump_to, last_step", [(3.5, 6000), (3.5, 40000), (6.0, 40000)])
def test_a_loss_that_jumps_and_stays_up_diverged_however_long_the_log_goes_on(jump_to, last_step):
    # from the review: the climb's pace was measured to the log's end, so the longer a broken run went on logging
    # after its jump the less it ran away: 'plateau' at step 6,000, 'not_learning' at 40,000
    rng = np.random.default_rng(3)
    steps = np.arange(10, last_step + 1, 10)
    loss = 2.0 + 4.0 * (steps / 10.0) ** -0.5
    loss = np.where(steps > 2000, jump_to, loss) * (1 + rng.normal(0, 0.01, len(steps)))
    analysis = analyze_curve(Curve(steps=steps, loss=loss))
    assert analysis.diagnosis == "diverged" and 1900 <= analysis.divergence_step <= 2000
