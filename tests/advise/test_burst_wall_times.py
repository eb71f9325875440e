"""A log written in one burst (converted, replayed, logged after the fact) carries wall times but no step time:
read as a pace (a ``SummaryWriter`` writes a scalar in about 10 µs), it priced the rest of a run at ¥0.00 with no
caveat. Rows under ``MIN_LOGGED_ROW_GAP_S`` apart are not used, said once, and the plan is priced as for a log without
wall times; a log with a real pace (0.2 s a step) is read as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from gpuwise.advise import AdviseSettings, PricingRequest, advise, read_log
from gpuwise.advise.wall_times import MIN_LOGGED_ROW_GAP_S, burst_note
from gpuwise.catalog import load_catalog
from gpuwise.cli.app import main

STEPS = range(1, 200)
REAL_STEP_S = 0.2
# A SummaryWriter's own pace, stamped: left to the writer, a loaded CI machine once wrote rows over
# MIN_LOGGED_ROW_GAP_S apart and the burst read as a pace (the test failed there, not the rule).
WRITER_ROW_GAP_S = 1.2e-5
UNIX_START_S = 1_733_000_000.0
NO_WALL_TIMES_NOTE = "pass --step-time-s (the log has no wall times)"


def _loss(step: int) -> float:
    return 2.0 / step ** 0.3 + 0.1


def _tensorboard_run(tmp_path, step_s: float | None):
    """A TensorBoard run of ``train/loss``: stamped at the pace the writer goes by itself (``step_s`` None), else
    ``step_s`` apart, as a training loop writes it."""
    run = tmp_path / ("burst" if step_s is None else "paced")
    gap_s = WRITER_ROW_GAP_S if step_s is None else step_s
    with SummaryWriter(log_dir=str(run)) as writer:
        for step in STEPS:
            writer.add_scalar("train/loss", _loss(step), step, walltime=UNIX_START_S + gap_s * step)
    return run


def _advise_json(run, *options: str, capsys) -> dict:
    with pytest.raises(SystemExit) as code:
        main(["advise", str(run), "--gpu", "rtx-4090", "--provider", "autodl", "--json", *options])
    assert code.value.code == 0
    return json.loads(capsys.readouterr().out)


def test_a_summarywriter_burst_gives_no_step_time_and_says_why_in_json(tmp_path, capsys):
    out = _advise_json(_tensorboard_run(tmp_path, None), capsys=capsys)
    assert out["step_time_s"] is None
    assert "written in a burst, not a training pace" in out["wall_times_unused"]
    assert "pass --step-time-s" in out["wall_times_unused"]
    assert out["pricing_note"] == out["wall_times_unused"]   # priced as without wall times, with the reason


def test_a_burst_is_planned_as_a_log_without_wall_times_is(tmp_path, capsys):
    out = _advise_json(_tensorboard_run(tmp_path, None), capsys=capsys)
    times = tmp_path / "no_times.csv"
    times.write_text("step,loss\n" + "".join(f"{s},{_loss(s)}\n" for s in STEPS))
    without = _advise_json(times, capsys=capsys)
    assert without["pricing_note"] == NO_WALL_TIMES_NOTE and without["wall_times_unused"] is None
    for key in ("plan", "plan_summary", "gpu", "gpu_options"):
        assert out[key] == without[key]
    assert [a["kind"] for a in out["advice"]] == [a["kind"] for a in without["advice"]]


def test_a_burst_is_said_once_in_text_and_priced_at_nothing_nowhere(tmp_path, capsys):
    with pytest.raises(SystemExit) as code:
        main(["advise", str(_tensorboard_run(tmp_path, None)), "--gpu", "rtx-4090", "--provider", "autodl"])
    assert code.value.code == 0
    text = " ".join(capsys.readouterr().out.split())   # rich wraps lines
    assert text.count("written in a burst") == 1
    assert "¥0.00" not in text and "ms/step" not in text


def test_a_burst_without_a_gpu_still_says_why_there_is_no_step_time(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["advise", str(_tensorboard_run(tmp_path, None))])
    text = " ".join(capsys.readouterr().out.split())
    assert text.count("written in a burst") == 1 and "pass --gpu NAME" in text


def test_step_time_s_given_prices_a_burst_and_leaves_its_wall_times_unmentioned(tmp_path, capsys):
    out = _advise_json(_tensorboard_run(tmp_path, None), "--step-time-s", str(REAL_STEP_S), capsys=capsys)
    assert out["step_time_s"] == REAL_STEP_S and out["wall_times_unused"] is None
    assert out["plan_summary"]["cost"] > 0


def test_a_real_pace_of_a_fifth_of_a_second_is_still_read_and_priced(tmp_path, capsys):
    out = _advise_json(_tensorboard_run(tmp_path, REAL_STEP_S), capsys=capsys)
    assert out["step_time_s"] == pytest.approx(REAL_STEP_S, rel=1e-3)
    assert out["wall_times_unused"] is None
    assert out["plan_summary"]["cost"] > 0


def test_advise_reads_the_burst_from_the_curve_as_read(tmp_path):
    log = read_log(str(_tensorboard_run(tmp_path, None)))
    report = advise(log, AdviseSettings(), load_catalog(), PricingRequest(gpu_name="rtx-4090", provider="autodl"))
    assert report.analysis.step_time_s is None and report.plan is None
    assert report.analysis.wall_times_unused == report.pricing.note


@pytest.mark.parametrize("row_gap_s, burst", [
    (MIN_LOGGED_ROW_GAP_S * 1.01, False),  # about the least a training loop logs rows apart: a pace
    (MIN_LOGGED_ROW_GAP_S * 0.99, True),
    (WRITER_ROW_GAP_S, True),
    (REAL_STEP_S * 10, False),
])
def test_rows_under_the_least_gap_a_loop_logs_are_a_burst(row_gap_s, burst):
    steps = np.arange(0, 1000, 10)
    note = burst_note(steps, UNIX_START_S + row_gap_s * np.arange(len(steps)))
    assert (note is not None) is burst


def test_a_fast_run_logging_every_hundredth_step_is_a_pace():
    """0.5 ms a step logged every 100 steps: rows 50 ms apart (was: refused, 0.5 ms a step under 1 ms)."""
    steps = np.arange(0, 100_000, 100)
    assert burst_note(steps, UNIX_START_S + 5e-4 * steps) is None


def test_the_burst_note_names_the_span_and_the_steps_it_covers():
    steps = np.array([10, 20, 30, 40])
    times = np.array([np.nan, 100.0, 100.00002, 100.00004])   # a step without a time left out of the span
    note = burst_note(steps, times)
    assert "span 40 µs for 20 steps (20 µs between logged rows, the median)" in note
