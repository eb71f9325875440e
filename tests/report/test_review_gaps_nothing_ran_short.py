"""From the review of `gpuwise report`'s gap, nothing-ran and too-short rules, and of the rented GPU count:
ordinary logs (appended at two intervals, a bursty logger, few samples) were cut as if they had gaps; a gpuwise
run log's logger stall was taken off its run time; a GPU holding 19.5 GiB at 0.8% busy was called one nothing ran
on; a two-GPU log with one GPU lost early or joining late was called too short; the idle GPUs' price was said
twice on screen and not in the JSON. The logs are written as nvidia-smi and `gpuwise run` write them."""

from __future__ import annotations

import json

import pytest

from gpuwise.report import build_report
from gpuwise.report import usage as usage_rules
from gpuwise.runlog import RunLog

from tests.report.helpers import one_line, text_of
from tests.report.test_trial_report_gaps_and_idle import A100, HEADER, half_idle_h100s, row, write

MIB = 2**20


# 1. the gap rule's floor -----------------------------------------------------------------------------------------

def test_two_logs_appended_at_different_intervals_without_a_pause_have_no_gap(tmp_path, catalog):
    times = list(range(600)) + [600 + 60 * k for k in range(300)]        # 10 min at 1 s, then 5 h at 60 s
    report = build_report(write(tmp_path / "mixed_iv.csv", [HEADER] + [row(t) for t in times]), catalog,
                          gpu_price=(15.0, "CNY"))
    assert report.usage.duration_s == pytest.approx(times[-1])         # 18,540 s, was 600 s
    assert report.usage.gaps == ()
    best = report.right_sizing.cheaper[0]
    assert best.saving_for_run == pytest.approx(best.saving_per_hour * times[-1] / 3600)


def test_a_bursty_logger_and_a_few_samples_have_no_gap(tmp_path, catalog):
    bursts = [31 * b + k for b in range(200) for k in range(5)]     # 5 samples 1 s apart, then a 31 s step
    report = build_report(write(tmp_path / "irregular.csv", [HEADER] + [row(t) for t in bursts]), catalog)
    assert report.usage.duration_s == pytest.approx(bursts[-1]) and report.usage.gaps == ()
    few = list(range(11)) + [30]                                    # 12 at 1 s, then one 20 s later
    report = build_report(write(tmp_path / "few2.csv", [HEADER] + [row(t) for t in few]), catalog)
    assert report.usage.duration_s == pytest.approx(30.0) and report.usage.gaps == ()


def test_a_gap_is_over_gap_min_s_and_its_note_says_it_may_be_a_pause_of_the_job(tmp_path, catalog):
    pause = usage_rules.GAP_MIN_S + 60
    times = [10.0 * k for k in range(180)] + [1790 + pause + 10.0 * k for k in range(90)]
    report = build_report(write(tmp_path / "pause.csv", [HEADER] + [row(t) for t in times]), catalog)
    assert [g.duration_s for g in report.usage.gaps] == [pytest.approx(pause)]
    short = [10.0 * k for k in range(180)] + [1790 + usage_rules.GAP_MIN_S + 10.0 * k for k in range(90)]
    assert build_report(write(tmp_path / "short.csv", [HEADER] + [row(t) for t in short]), catalog).usage.gaps == ()
    note = one_line(next(n for n in report.notes if "no samples for" in n))
    assert "may be" in note and "counted as not run" in note
    assert "If the GPU was rented through it, the saving is per hour of log" in note


# 2. a gpuwise run log: the meta's start to end is run time -----------------------------------------------------------

def test_a_logger_stall_in_a_run_log_is_still_rented_time(tmp_path, catalog):
    t0, stall = 1.8e9, 10 * 60.0
    times = [t0 + k for k in range(100)] + [t0 + 99 + stall + k for k in range(100)]
    path = tmp_path / "run.db"
    with RunLog(path) as log:
        for key, value in (("start_t_s", t0 - 0.5), ("end_t_s", times[-1] + 0.5), ("command", '["train"]'),
                           ("exit_code", 0), ("interval_s", 1.0)):
            log.set_meta(key, value)
        log.write_gpu_samples({"t_s": t, "gpu_index": 0, "name": A100, "utilization_pct": 80.0,
                               "memory_used_bytes": 12000 * MIB, "memory_total_bytes": 40960 * MIB,
                               "power_w": 200.0} for t in times)
    report = build_report(path, catalog, gpu_price=(15.0, "CNY"))
    assert report.usage.duration_s == pytest.approx(times[-1] - times[0] + 1.0)     # was 198 s
    assert report.usage.gaps == () and not any("no samples for" in n for n in report.notes)
    best = report.right_sizing.cheaper[0]
    assert best.saving_for_run == pytest.approx(best.saving_per_hour * report.usage.duration_s / 3600)


# 3. nothing ran: memory beyond a CUDA context means something ran ----------------------------------------------------

def test_a_gpu_holding_memory_at_almost_no_busy_time_keeps_its_right_sizing(tmp_path, catalog):
    lines = [HEADER] + [row(t, util="20 %" if k % 25 == 0 else "0 %", used="20000 MiB", power="60.00 W")
                        for k, t in enumerate(range(0, 3600, 10))]               # 0.8% busy, 19.5 GiB held
    report = build_report(write(tmp_path / "server.csv", lines), catalog, gpu_price=(15.0, "CNY"))
    assert not report.usage.nothing_ran and report.right_sizing is not None and report.right_sizing.cheaper
    assert not any("nothing ran" in n for n in report.notes)
    assert report.usage.busy_share == pytest.approx(0.008, abs=1e-3)
    # a CUDA context and no more, idle: still nothing ran
    lines = [HEADER] + [row(t, util="0 %", used="500 MiB") for t in range(600)]
    assert 500 * MIB < usage_rules.CUDA_CONTEXT_MAX_BYTES
    assert build_report(write(tmp_path / "ctx.csv", lines), catalog).usage.nothing_ran


# 4. too short: judged by the log as a whole ---------------------------------------------------------------------------

LOST = "[GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]"


@pytest.mark.parametrize("case", ["lost_early", "late"])
def test_a_gpu_lost_early_or_joining_late_does_not_make_a_long_log_too_short(tmp_path, catalog, case):
    lines = [HEADER]
    for k in range(600):
        lines.append(row(k, index=0))
        if case == "lost_early":
            lines.append(row(k, index=1) if k < 5 else f"{row(k, index=1).rsplit(', ', 4)[0]}, {LOST}")
        elif k >= 595:
            lines.append(row(k, index=1))
    report = build_report(write(tmp_path / f"{case}.csv", lines), catalog, gpu_price=(15.0, "CNY"))
    assert report.usage.job_labels == ("0", "1")
    assert not report.usage.too_short
    assert not any(n.startswith("too short") for n in report.notes)
    assert "too short" not in one_line(text_of(report))


# 6. the GPUs rented: one count, the idle ones' price said once, and in the JSON ------------------------------------------

def test_the_idle_gpus_price_is_said_once_on_screen_and_is_in_the_json(tmp_path, catalog):
    report = build_report(half_idle_h100s(tmp_path), catalog, gpu_price=(15.0, "CNY"))
    assert report.usage.gpus_rented == 8
    text = one_line(text_of(report))
    assert text.count("comes on top of every saving") == 1
    assert "their ¥60.00/h comes on top of every saving" in text
    sizing = json.loads(json.dumps(report.to_dict()))["right_sizing"]
    assert sizing["idle_gpus_cost_per_hour"] == pytest.approx(60.0) and sizing["idle_gpu_count"] == 4
