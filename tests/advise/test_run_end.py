"""advise reads how a guarded run ended (the guard's ``train_end`` meta) and says it first.

Before, `gpuwise advise run.db` on the log of a run that crashed (a ValueError in the data) or was preempted read
the curve as if the run had stopped of its own accord: "plateau", "not learning", with no word that the run did
not finish or that the curve ends because of it. Real guard run logs (a real Guard, a real exception out of its
``with`` block) and logs written with RunLog as the guard writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gpuwise.advise import PricingRequest, read_log
from gpuwise.advise import advise as run_advise
from gpuwise.catalog import load_catalog
from gpuwise.guard import Guard
from gpuwise.runlog import RunLog

from .curves import plateau_after


def _guarded_run_that_raises(path: Path, losses: np.ndarray, error: BaseException) -> Path:
    """A real Guard logging ``losses`` (one per step) into the run log ``path``, then ``error`` out of its block."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randn(2, 4)
    with pytest.raises(type(error)):
        with Guard(path.parent / "ck", model, opt, every_steps=10_000, run_log=path) as guard:
            for value in losses:
                guard.step(x, lambda b, v=float(value): model(b).sum() * 0.0 + v)
            raise error
    return path


def _written_log(path: Path, steps, losses, meta: dict[str, object], t0_s: float = 1.7e9) -> Path:
    """A run log as the guard writes one: ``loss`` per step at 0.5 s a step, and ``meta`` (the train_end keys)."""
    with RunLog(path) as log:
        for s, v in zip(steps, losses):
            log.log_train(int(s), t_s=t0_s + 0.5 * float(s), loss=float(v))
        for key, value in meta.items():
            log.set_meta(key, value)
    return path


@pytest.fixture(scope="module")
def crashed_plateau(tmp_path_factory) -> Path:
    _, y = plateau_after(60, n=160)
    return _guarded_run_that_raises(tmp_path_factory.mktemp("crash") / "run.db", y,
                                    ValueError("bad sample 1234 in shard 7"))


def test_a_crashed_plateau_says_first_that_the_run_crashed_and_the_plateau_is_before_it(crashed_plateau, cli_run):
    code, out, err = cli_run("advise", str(crashed_plateau))
    assert code == 0, err
    flat = " ".join(out.replace("│", " ").split())    # the panels' borders out of the text
    assert "The run did not finish: crashed at step 160 (ValueError: bad sample 1234 in shard 7)." in flat
    assert flat.index("The run did not finish") < flat.index("Diagnosis: plateau (of the steps before the run crashed)")
    first_panel = flat[flat.index("╭"):flat.index("╰")]
    assert "The run crashed" in first_panel and "ends there because of the crash" in first_panel
    assert "The plateau is read from the steps before the crash; it is not why the run ended" in first_panel


def test_json_holds_the_run_end_and_opens_the_advice_with_it(crashed_plateau, cli_run):
    code, out, err = cli_run("advise", str(crashed_plateau), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["diagnosis"] == "plateau"
    assert d["run_end"] == {"outcome": "crashed", "step": 160, "detail": "ValueError: bad sample 1234 in shard 7",
                            "finished": False, "ends_curve": True}
    assert d["advice"][0]["kind"] == "run_end" and d["advice"][0]["numbers"]["outcome"] == "crashed"


def test_a_preempted_run_that_was_not_learning_says_it_was_preempted(tmp_path):
    steps = np.arange(1, 201)
    flat = 2.3 + np.random.default_rng(0).normal(0, 0.02, len(steps))
    log = _written_log(tmp_path / "run.db", steps, flat, {
        "train_end": "preempted", "train_end_step": 200, "train_end_t_s": 1.7e9 + 101,
        "train_end_detail": "checkpointed; exiting with code 75 to be restarted"})
    report = run_advise(read_log(log))
    assert report.diagnosis == "not_learning"
    first = report.advice[0]
    assert first.kind == "run_end" and first.title == "The run was preempted"
    assert "The loss had not fallen before the preemption" in first.text
    assert "exiting with code 75 to be restarted" in first.text


def test_an_earlier_attempts_end_is_not_said_to_end_the_curve(tmp_path):
    s, y = plateau_after(60, n=160)
    log = _written_log(tmp_path / "run.db", s + 1, y, {
        "train_end": "crashed", "train_end_step": 80, "train_end_t_s": 1.7e9 + 41,
        "train_end_detail": "step 81 raised ValueError: bad sample"})
    report = run_advise(read_log(log))
    assert report.run_end is not None and not report.run_end.ends_curve and not report.run_end.cut_short
    assert report.advice[0].kind == "run_end" and report.advice[0].title == "An earlier attempt did not finish"
    assert "to step 160" in report.advice[0].text


def test_a_restart_that_logged_lower_steps_again_after_the_end_is_told_by_the_time(tmp_path):
    steps = np.arange(1, 101)
    _, y = plateau_after(40, n=100)
    # the end was recorded at t=1.7e9+30 (step 60), yet the last losses were logged later (a resumed attempt)
    end = {"train_end": "crashed", "train_end_step": 120, "train_end_t_s": 1.7e9 + 30, "train_end_detail": ""}
    log = _written_log(tmp_path / "run.db", steps, y, end)
    assert run_advise(read_log(log)).run_end.ends_curve is False


def test_a_finished_run_ends_where_it_finished_and_prices_no_more_steps(tmp_path):
    s, y = plateau_after(60, n=160)
    log = _written_log(tmp_path / "run.db", s + 1, y, {"train_end": "finished", "train_end_step": 160,
                                                       "train_end_t_s": 1.7e9 + 81, "train_end_detail": ""})
    report = run_advise(read_log(log), catalog=load_catalog(None),
                        request=PricingRequest(gpu_name="a100-80gb-sxm4", price_per_hour=2.0, price_currency="USD",
                                               currency="USD"))
    assert report.run_end.finished and not [x for x in report.advice if x.kind == "run_end"]
    assert report.end_step == 160 and "the run finished" in report.end_reason
    assert report.plan is None and not [x for x in report.advice if x.kind == "switch_gpu"]


@pytest.mark.parametrize("meta", [{}, {"train_end": "exploded", "train_end_step": 3},
                                  {"train_end": "crashed", "train_end_step": "n/a"}])
def test_a_log_without_a_recognised_end_records_none_or_no_step(tmp_path, meta):
    s, y = plateau_after(60, n=160)
    end = run_advise(read_log(_written_log(tmp_path / "run.db", s + 1, y, meta))).run_end
    if meta.get("train_end") == "crashed":
        assert end is not None and end.step is None and end.words == "crashed"
    else:
        assert end is None


def test_a_run_stopped_without_close_is_not_said_to_be_cut_short_by_it(tmp_path):
    s, y = plateau_after(60, n=160)
    log = _written_log(tmp_path / "run.db", s + 1, y, {
        "train_end": "stopped", "train_end_step": 160, "train_end_t_s": 1.7e9 + 81,
        "train_end_detail": "the process ended without guard.close()"})
    first = run_advise(read_log(log)).advice[0]
    assert first.kind == "run_end" and first.title == "The run stopped without guard.close()"
    assert "the log cannot tell" in first.text and "not because training is done" not in first.text
    assert "call guard.close() after it" in first.text
