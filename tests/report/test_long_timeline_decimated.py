"""`gpuwise report --html` drew every sample of each line: a day's log at 1 s is 86,400 points a line on a timeline
under a thousand pixels wide, seconds of drawing for the same picture. A long line is now cut to the lowest and
highest sample of each of ``PLOT_BUCKETS`` stretches (min/max decimation) before it is drawn: its spikes, dips and
gaps stay where they were; a short log is drawn exactly."""

from __future__ import annotations

import math

import matplotlib.axes
import numpy as np
import pytest

from gpuwise.report import build_report
from gpuwise.report.decimate import DECIMATE_ABOVE_POINTS, PLOT_BUCKETS, min_max_decimate
from gpuwise.report.html import render_html
from gpuwise.runlog import RunLog

GIB = 2**30
T0 = 1_700_000_000.0
SPIKE_S, DIP_S = 1234, 5000                    # the one sample at 100 %, the one at 0 %
MISSING_S = range(2000, 2101)                  # no utilisation reading: the busy line breaks
GAP_S = range(3000, 4000)                      # no samples at all: a gap


@pytest.fixture
def plotted(monkeypatch):
    """(x, y, label) of every line the HTML's plots draw."""
    calls: list[tuple[list, list, str]] = []
    plot = matplotlib.axes.Axes.plot

    def recording_plot(self, *args, **kwargs):
        calls.append((list(args[0]), list(args[1]), kwargs.get("label")))
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", recording_plot)
    return calls


def _busy_pct(t: int) -> float | None:
    if t in MISSING_S:
        return None
    return 100.0 if t == SPIKE_S else 0.0 if t == DIP_S else 30.0 + 40.0 * math.sin(t / 37.0) ** 2


def _log(path, seconds: int, skip=range(0)):
    """One GPU sampled every second for ``seconds`` s, none in ``skip``, as `gpuwise run` writes it."""
    times = [t for t in range(seconds) if t not in skip]
    with RunLog(path) as log:
        log.set_meta("command", ["python", "train.py"])
        log.set_meta("start_t_s", T0)
        log.write_gpu_samples(dict(t_s=T0 + t, gpu_index=0, uuid="GPU-0", name="NVIDIA A100-SXM4-80GB",
                                   utilization_pct=_busy_pct(t), memory_used_bytes=20 * GIB + t * 2**20,
                                   memory_total_bytes=80 * GIB, process_memory_bytes=19 * GIB, power_w=250.0)
                              for t in times)
        log.set_meta("end_t_s", T0 + times[-1])
        log.set_meta("exit_code", 0)
    return path, times


def _runs(x: list[float], y: list[float]) -> list[tuple[float, float]]:
    """(first x, last x) of each unbroken run of the line."""
    runs, start, last = [], None, None
    for a, b in zip(x, y):
        if math.isnan(a) or math.isnan(b):
            if start is not None:
                runs.append((start, last))
            start = None
        else:
            start, last = (a if start is None else start), a
    return runs + ([(start, last)] if start is not None else [])


def test_a_long_line_keeps_its_spike_its_dip_and_every_gap_in_at_most_two_points_a_bucket(tmp_path, catalog, plotted):
    path, times = _log(tmp_path / "long.db", 7000, skip=GAP_S)
    render_html(build_report(path, catalog))
    x, y, _ = next(line for line in plotted if line[2] == "GPU 0")          # the busy line
    minutes = [(a / 60.0, b / 60.0) for a, b in ((0, 1999), (2101, 2999), (4000, 6999))]
    assert len(times) > 3 * DECIMATE_ABOVE_POINTS
    assert len(x) <= 2 * PLOT_BUCKETS + 2 * len(minutes) + len(minutes) - 1
    assert np.nanmax(y) == 100.0 and np.nanmin(y) == 0.0
    assert np.array(_runs(x, y)) == pytest.approx(np.array(minutes))
    memory = next(line for line in plotted if line[2] == "GPU 0 memory used")
    assert len(memory[0]) <= 2 * PLOT_BUCKETS + 3 and np.nanmax(memory[1]) == pytest.approx((20 * GIB + 6999 * 2**20) / GIB)


def test_a_short_log_is_drawn_sample_by_sample(tmp_path, catalog, plotted):
    path, times = _log(tmp_path / "short.db", 900)
    render_html(build_report(path, catalog))
    x, y, _ = next(line for line in plotted if line[2] == "GPU 0")
    drawn = [(a, b) for a, b in zip(x, y) if not (math.isnan(a) or math.isnan(b))]
    assert [a for a, _ in drawn] == pytest.approx([t / 60.0 for t in times])
    assert [b for _, b in drawn] == [_busy_pct(t) for t in times]
    assert len(x) <= len(times) + 1                   # nothing added but the line's end


def test_each_bucket_keeps_its_lowest_and_highest_sample():
    rng = np.random.default_rng(7)
    t = np.cumsum(rng.uniform(0.5, 1.5, 50_000))
    y = rng.normal(size=t.size)
    y[rng.integers(0, t.size, 300)] = np.nan
    kept_t, kept_y = min_max_decimate(t, y, buckets=500)
    assert kept_t.size < t.size / 20
    edges = np.linspace(t[0], t[-1], 501)
    for a, b in zip(edges[:-1], edges[1:]):          # inside each bucket (its ends left out: float rounding)
        inside, kept = (t > a) & (t < b), (kept_t > a) & (kept_t < b)
        assert np.nanmin(y[inside]) == np.nanmin(kept_y[kept]) and np.nanmax(y[inside]) == np.nanmax(kept_y[kept])
    missing = np.isnan(y)
    assert np.isnan(kept_y).sum() == (missing & ~np.concatenate(([False], missing[:-1]))).sum()   # one per run of NaN
