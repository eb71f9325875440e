"""Fourth trial: the Overfitting box named a median of the last 3 evals as the eval loss "by" the last eval step;
the Plateau box and the Forecast called a curve flat by two measures (a share of what the run gained vs. a share
of the loss), and neither said which; a large log was read with nothing shown."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuwise.advise import read_log
from gpuwise.advise import advise as run_advise
from gpuwise.advise import readers
from gpuwise.advise.phases import PLATEAU
from gpuwise.advise.wording import drop_text, g
from gpuwise.cli.app import main


def _overfit_csv(tmp_path):
    rng = np.random.default_rng(3)
    lines = ["step,loss,eval_loss"]
    evals = {}
    for s in range(0, 3000, 10):
        train = 2.0 * (s + 10) ** -0.15 + 0.2 + rng.normal(0, 0.01)
        ev = ""
        if s % 100 == 90:
            e = 0.9 + 1.5 * (s + 10) ** -0.3 + (0.0002 * (s - 1000) if s > 1000 else 0.0) + rng.normal(0, 0.04)
            e = 1.319 if s == 2990 else round(e, 4)   # the last eval well below the median of the last three
            evals[s] = e
            ev = f"{e}"
        lines.append(f"{s},{train:.5f},{ev}")
    path = tmp_path / "over.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, evals


def test_the_overfitting_text_says_its_number_is_a_median_and_quotes_the_last_eval(tmp_path):
    path, evals = _overfit_csv(tmp_path)
    report = run_advise(read_log(path))
    item = next(x for x in report.advice if x.kind == "overfitting")
    last_step = max(evals)
    last3 = float(np.median([evals[s] for s in sorted(evals)[-3:]]))
    assert g(last3) != g(evals[last_step])
    assert f"by step {last_step:,}" not in item.text          # the median is not the loss "by" that step
    assert f"at step {last_step:,}: {g(evals[last_step])}" in item.text
    assert "median of 3" in item.text
    assert item.numbers["last_eval_loss"] == evals[last_step]
    assert item.numbers["eval_loss_now"] == float(f"{last3:.6g}")
    assert "median" in item.numbers["eval_loss_now_is"]


def _power_law(tmp_path):
    steps = np.arange(1, 5001)
    path = tmp_path / "pl.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{0.5 + 3 * s ** -0.5:.6f}\n" for s in steps))
    return path


def test_plateau_and_forecast_call_a_curve_flat_by_one_measure_and_say_what_it_is_a_share_of(tmp_path):
    report = run_advise(read_log(_power_law(tmp_path)))
    a = report.analysis
    last = a.phases[-1]
    assert last.kind == PLATEAU
    # flat by the phases' measure now: the forecast, by the same measure, is flat from the last step, not later
    assert a.plateau_forecast_step == a.last_step
    forecast = next(x for x in report.advice if x.kind == "forecast")
    assert "turns flat" not in forecast.text
    plateau = next(x for x in report.advice if x.kind == "plateau")
    assert "gained so far" in plateau.text
    # the loss's own drop per doubling over the phase, from the formula, is said beside the share
    law = lambda s: 0.5 + 3 * s ** -0.5   # noqa: E731
    s0, s1 = last.start_step, last.end_step
    own = 1 - (law(s1) / law(s0)) ** (np.log(2) / np.log(s1 / s0))
    assert own > 0.02 > last.drop_per_doubling
    said = plateau.numbers["loss_drop_per_doubling"]
    assert abs(said - own) < 0.002
    assert f"the loss itself falls {drop_text(said)}" in plateau.text


def test_a_long_read_reports_its_progress(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "PROGRESS_EVERY_ROWS", 100)
    told: list[str] = []
    csv_path = tmp_path / "log.csv"
    csv_path.write_text("step,loss\n" + "".join(f"{s},{1 + 1 / s}\n" for s in range(1, 451)))
    read_log(csv_path, None, told.append)
    jsonl_path = tmp_path / "log.jsonl"
    jsonl_path.write_text("".join(json.dumps({"step": s, "loss": 1 + 1 / s}) + "\n" for s in range(1, 251)))
    read_log(jsonl_path, None, told.append)
    assert told == [f"reading log.csv: {n:,} rows" for n in (100, 200, 300, 400)] + \
        [f"reading log.jsonl: {n:,} rows" for n in (100, 200)]


def test_json_stdout_stays_clean_while_progress_is_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(readers, "PROGRESS_EVERY_ROWS", 100)
    with pytest.raises(SystemExit) as done:
        main(["advise", str(_power_law(tmp_path)), "--json"])
    out = capsys.readouterr()
    assert not done.value.code
    assert json.loads(out.out)["diagnosis"] == "plateau"
    assert "reading" not in out.err
