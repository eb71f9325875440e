"""What a new user's trial of `gpuwise report` found (second trial): two appended logs' gap counted as run time,
[N/A] power read as 0 kWh, a provider without the rented GPU's price showing an empty table, the HTML table
capped, numbers cut on a narrow terminal, a lost GPU flooding the notes, idle GPUs dropped or judged, too short a
log judged with confidence, and misleading messages for a changed header or a value out of range. The logs are
written as nvidia-smi writes them (the trial's mk.py)."""

from __future__ import annotations

import datetime as dt
import math
import os
import re

import matplotlib.axes
import pytest

from gpuwise.report import ReportError, build_report
from gpuwise.report.html import render_html
from gpuwise.report import usage as usage_rules   # its GAP_OVER_MEDIAN, MIN_SAMPLES_TO_JUDGE

from tests.report.helpers import one_line, text_of

T0 = dt.datetime(2026, 11, 2, 9, 0, 0)
HEADER = "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]"
A100 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"


def ts(s: float) -> str:
    return (T0 + dt.timedelta(seconds=s)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def row(t: float, index: int = 0, util="50 %", used="12000 MiB", power="200.00 W", name=A100, total="40960 MiB") -> str:
    return f"{ts(t)}, {name}, {index}, {util}, {used}, {total}, {power}"


def write(path, lines) -> str:
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def plotted(monkeypatch):
    """What the HTML's plots draw: (x, y, kwargs) of every Axes.plot call, and the text of every Axes.text."""
    calls: dict[str, list] = {"plot": [], "text": []}
    plot, text = matplotlib.axes.Axes.plot, matplotlib.axes.Axes.text

    def recording_plot(self, *args, **kwargs):
        calls["plot"].append((list(args[0]) if args else [], list(args[1]) if len(args) > 1 else [], kwargs))
        return plot(self, *args, **kwargs)

    def recording_text(self, x, y, s, *args, **kwargs):
        calls["text"].append(s)
        return text(self, x, y, s, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", recording_plot)
    monkeypatch.setattr(matplotlib.axes.Axes, "text", recording_text)
    return calls


# 1. two logs appended with a 2 h gap -------------------------------------------------------------------

def appended(tmp_path) -> str:
    """600 s at 1 s, the header again, 600 s more starting 2 h after the first (the trial's repeat.csv)."""
    first = [HEADER] + [row(k) for k in range(600)]
    second = [HEADER] + [row(7200 + k, util="90 %", used="15000 MiB", power="300.00 W") for k in range(600)]
    return write(tmp_path / "repeat.csv", first + second)


def test_a_gap_between_appended_logs_is_not_run_time_energy_nor_saving(tmp_path, catalog):
    report = build_report(appended(tmp_path), catalog, gpu_price=(15.0, "CNY"))
    u = report.usage
    assert u.duration_s == pytest.approx(2 * 599.0)                        # not 2.17 h
    assert u.power.energy_kwh == pytest.approx((200 * 599 + 300 * 599) / 3.6e6)   # ~0.083, not 0.54 kWh
    best = report.right_sizing.cheaper[0]
    assert best.saving_for_run == pytest.approx(best.saving_per_hour * 2 * 599.0 / 3600)
    gap_notes = [n for n in report.notes if "no samples for" in n]
    assert len(gap_notes) == 1 and "110.0 min" in gap_notes[0]               # 7200 - 599 s
    assert "20.0 min" in text_of(report).splitlines()[0]


def test_the_timeline_breaks_its_line_at_a_gap(tmp_path, catalog, plotted):
    render_html(build_report(appended(tmp_path), catalog, gpu_price=(15.0, "CNY")))
    x, y, _ = next(c for c in plotted["plot"] if c[2].get("label") == "GPU 0")
    before, after = x.index(599 / 60), x.index(7200 / 60)
    assert any(math.isnan(v) for v in y[before + 1:after])                  # no line drawn across the gap


def test_the_gap_rule_is_relative_to_the_sampling_interval(tmp_path, catalog):
    # every 60 s (its GAP_OVER_MEDIAN intervals over usage_rules.GAP_MIN_S): one step of 9 intervals (not a gap)
    # and one of usage_rules.GAP_OVER_MEDIAN + 1 intervals (a gap). (Was every 10 s: a 110 s step a gap, before
    # the GAP_MIN_S floor.)
    every = 60.0
    assert every * usage_rules.GAP_OVER_MEDIAN > usage_rules.GAP_MIN_S
    gap = every * (usage_rules.GAP_OVER_MEDIAN + 1)
    times = [every * k for k in range(30)] + [every * 29 + every * 9] + [every * 38 + every * k for k in range(1, 30)]
    times += [times[-1] + gap] + [times[-1] + gap + every * k for k in range(1, 20)]
    report = build_report(write(tmp_path / "l60.csv", [HEADER] + [row(t) for t in times]), catalog)
    assert report.usage.duration_s == pytest.approx(times[-1] - times[0] - gap)
    assert len(report.usage.gaps) == 1


# 2. [N/A] power ----------------------------------------------------------------------------------------------

def test_power_missing_every_other_sample_still_gives_the_energy(tmp_path, catalog):
    lines = [HEADER] + [row(k, power="[N/A]" if k % 2 else "150.00 W") for k in range(600)]
    report = build_report(write(tmp_path / "na.csv", lines), catalog)
    assert report.usage.power.energy_kwh == pytest.approx(150 * 599 / 3.6e6)
    assert "0.02 kWh" in text_of(report) and "0.00 kWh" not in text_of(report)


def test_energy_is_unknown_not_zero_where_power_is_missing_for_long(tmp_path, catalog):
    lines = [HEADER] + [row(k, power="150.00 W" if k < 100 or k > 500 else "[N/A]") for k in range(600)]
    report = build_report(write(tmp_path / "hole.csv", lines), catalog)
    assert report.usage.power.energy_kwh is None
    assert report.to_dict()["usage"]["power"]["energy_kwh"] is None
    text = one_line(text_of(report))
    assert "energy unknown" in text and "kWh" not in text
    assert sum("energy unknown" in n for n in report.notes) == 1


# 3. a provider without the rented GPU's price --------------------------------------------------------------------

def test_a_provider_without_the_rented_gpus_price_lists_the_gpus_that_hold_the_job(tmp_path, catalog):
    report = build_report(write(tmp_path / "u.csv", [HEADER] + [row(k) for k in range(600)]), catalog, provider="aws")
    r = report.right_sizing
    assert r.rented_price_per_gpu_hour is None
    priced = [o.gpu_id for o in r.options if o.fits and o.price_per_hour_all_gpus is not None]
    assert priced
    text = text_of(report)
    assert "the rented GPU has no price, so no saving can be computed" in text
    table = [line.split()[0] for line in text.splitlines() if re.match(r"^[a-z0-9-]+ +\d+ ", line)]
    assert table[:len(priced)] == priced            # those that hold it, with a price, cheapest first


# 4. the HTML table lists every GPU --------------------------------------------------------------------------------

def test_the_html_table_lists_every_gpu_that_would_have_held_the_job(catalog):
    seed = os.path.join(os.path.dirname(__file__), "..", "fixtures", "seed_a100_smi.csv")
    report = build_report(seed, catalog, gpu_price=(15.0, "CNY"))
    page = render_html(report)
    table = re.findall(r"<tr class='[a-z]*'><td>([^<]+?)(?: \(rented\))?</td>", page)
    priced = [o.gpu_name for o in report.right_sizing.options if o.fits and o.cost_per_job_hour is not None]
    assert sorted(table) == sorted(priced)
    assert "NVIDIA T4" in table                       # docs/report.md: the T4 saves money


# 5. a narrow terminal -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [60, 40, 24])
def test_a_narrow_terminal_never_cuts_a_number_nor_the_rented_mark(tmp_path, catalog, width):
    report = build_report(write(tmp_path / "u.csv", [HEADER] + [row(k) for k in range(600)]), catalog,
                          gpu_price=(15.0, "CNY"))
    text = text_of(report, width)
    assert "…" not in text
    assert "* the rented GPU" in text
    assert any("*" in line for line in text.split("* the rented GPU")[0].splitlines()[-12:])   # the row's mark
    assert "left out to fit" in one_line(text)
    if width >= 40:                        # columns gave way: every cell whole on its line
        assert re.search(r"^a100-40gb-sxm4 \*", text, re.M)
        assert "¥13.14" in text            # the best saving per hour


# 6. a lost GPU in a line of its own ---------------------------------------------------------------------------------

LOST = "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU"


def lost_log(tmp_path, *, bus_ids: bool) -> str:
    lines = [HEADER.replace("index,", "index, pci.bus_id,") if bus_ids else HEADER]
    for k in range(600):
        for i, bus in ((0, "00000000:18:00.0"), (1, "00000000:3B:00.0")):
            if i == 1 and k >= 300:
                lines.append(LOST)
                continue
            line = row(k, index=i)
            lines.append(line.replace(f", {i}, ", f", {i}, {bus}, ", 1) if bus_ids else line)
    return write(tmp_path / "lost.csv", lines)


def test_a_lost_gpu_line_gives_one_note_and_marks_the_gpu_with_that_bus_id_lost(tmp_path, catalog):
    report = build_report(lost_log(tmp_path, bus_ids=True), catalog)
    said = [n for n in report.notes if "GPU is lost" in n]
    assert len(said) == 1 and "GPU 1" in said[0] and "300" in said[0]
    assert {d.label: bool(d.lost) for d in report.usage.devices} == {"0": False, "1": True}


def test_a_lost_gpu_line_without_bus_ids_says_the_log_does_not_say_which(tmp_path, catalog):
    report = build_report(lost_log(tmp_path, bus_ids=False), catalog)
    said = [n for n in report.notes if "GPU is lost" in n]
    assert len(said) == 1 and "does not say which GPU" in said[0] and "0000:3B:00.0" in said[0]
    assert len(report.notes) < 10


# 7. idle GPUs of a multi-GPU log ----------------------------------------------------------------------------------------

def half_idle_h100s(tmp_path) -> str:
    """Eight H100s for 600 s at 1 s: GPUs 0-3 busy (90%, 30000 MiB, 500 W), GPUs 4-7 idle (0%, 4 MiB, 70 W)."""
    lines = [HEADER] + [row(k, index=i, util="90 %" if i < 4 else "0 %", used="30000 MiB" if i < 4 else "4 MiB",
                            power="500.00 W" if i < 4 else "70.00 W", name=H100, total="81559 MiB")
                        for k in range(600) for i in range(8)]
    return write(tmp_path / "eight.csv", lines)


def test_gpus_idle_the_whole_run_are_said_and_the_rented_line_counts_them(tmp_path, catalog):
    report = build_report(half_idle_h100s(tmp_path), catalog, gpu_price=(15.0, "CNY"))
    assert report.usage.idle_labels == ("4", "5", "6", "7")
    assert report.right_sizing.gpu_count == 4
    text = one_line(text_of(report))
    assert "4 of the 8 GPUs in the log were idle the whole run (GPUs 4-7" in text
    assert "Rented: 8 × NVIDIA H100" in text and "¥120.00/h for 8 GPUs" in text
    assert "compared as the 4 the job used" in text
    assert "4 (of 8; 4 idle) × NVIDIA H100" in text.split("Memory")[0]


# 8. a GPU nothing ran on ------------------------------------------------------------------------------------------------

def test_a_gpu_nothing_ran_on_gets_a_note_not_a_verdict(tmp_path, catalog):
    lines = [HEADER] + [row(k, util="0 %", used="4 MiB", power="55.00 W") for k in range(600)]
    report = build_report(write(tmp_path / "idle.csv", lines), catalog, gpu_price=(15.0, "CNY"))
    assert report.right_sizing is None
    text = one_line(text_of(report))
    assert "Verdict" not in text and "cheaper GPU" not in text
    assert sum("nothing ran" in n for n in report.notes) == 1


# 9. too short a log ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("samples", [1, 2])
def test_too_short_a_log_says_so_and_draws_its_samples_as_dots(tmp_path, catalog, plotted, samples):
    report = build_report(write(tmp_path / "short.csv", [HEADER] + [row(k) for k in range(samples)]), catalog,
                          gpu_price=(15.0, "CNY"))
    assert samples < usage_rules.MIN_SAMPLES_TO_JUDGE and report.usage.too_short
    assert sum(n.startswith("too short to judge") for n in report.notes) == 1
    assert "Verdict (too short to judge" in one_line(text_of(report))
    render_html(report)
    drawn = [c for c in plotted["plot"] if c[2].get("label") == "GPU 0 memory used"]
    if samples == 1:
        assert drawn and drawn[0][2].get("marker")


def test_a_long_enough_log_is_not_too_short(tmp_path, catalog):
    report = build_report(write(tmp_path / "ok.csv", [HEADER] + [row(k) for k in range(usage_rules.MIN_SAMPLES_TO_JUDGE)]), catalog)
    assert not report.usage.too_short
    assert not any(n.startswith("too short") for n in report.notes)


# minor ------------------------------------------------------------------------------------------------------------------

def test_a_plot_panel_without_data_says_not_in_the_log(tmp_path, catalog, plotted):
    lines = [HEADER] + [row(k, util="[N/A]") for k in range(60)]
    render_html(build_report(write(tmp_path / "nu.csv", lines), catalog))
    assert "no utilisation in the log" in plotted["text"]
    assert not [c for c in plotted["plot"] if c[2].get("label") == "GPU 0"]


def test_a_gpu_whose_rows_stop_half_way_is_noted(tmp_path, catalog):
    lines = [HEADER]
    for k in range(600):
        lines.append(row(k, index=0))
        if k < 300:
            lines.append(row(k, index=1))
    report = build_report(write(tmp_path / "vanish.csv", lines), catalog)
    said = [n for n in report.notes if "stop before the log ends" in n]
    assert len(said) == 1 and "GPU 1" in said[0] and "rented for the whole run" in said[0]


def test_an_appended_log_with_other_columns_is_read_with_its_own_header(tmp_path, catalog):
    nounits = "timestamp, name, index, utilization.gpu, memory.used, memory.total, power.draw"
    lines = [HEADER] + [row(k) for k in range(30)] + [nounits] + [
        f"{ts(30 + k)}, {A100}, 0, 50, 12000, 40960, 200.00" for k in range(30)]
    report = build_report(write(tmp_path / "mixed.csv", lines), catalog)     # was: timestamp is not a date
    assert report.usage.devices[0].samples == 60
    assert not any("columns change" in n for n in report.notes)              # the same columns, other units
    more = [HEADER] + [row(k) for k in range(30)] + [HEADER + ", temperature.gpu"] + [
        row(30 + k) + ", 50" for k in range(30)]
    report = build_report(write(tmp_path / "mixed2.csv", more), catalog)
    assert report.usage.devices[0].samples == 60
    said = [n for n in report.notes if "columns change" in n]
    assert len(said) == 1 and "mixed2.csv:32" in said[0] and "temperature.gpu" in said[0]


def test_a_value_out_of_range_is_named_by_the_csv_column(tmp_path, catalog):
    with pytest.raises(ReportError, match=r"over.csv:3: memory.used 48.8 GiB is more than memory.total 40.0 GiB"):
        build_report(write(tmp_path / "over.csv", [HEADER, row(0), row(1, used="50000 MiB")]), catalog)
