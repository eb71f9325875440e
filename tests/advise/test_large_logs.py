"""`advise` on a huge CSV: read as a stream into bounded step bins, so memory does not grow with the file
(a 10-million-line CSV took 7.1 GB). Below the bound the curve is exactly the full read; above it every
point is a real logged row, the first and the last rows are kept, and there are at most 2 * N + 1 points."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from gpuwise.advise import downsample
from gpuwise.advise.downsample import StepBins
from gpuwise.advise.readers import read_log


def _loss(step: int) -> float:
    return round(2.0 + 8.0 / (1 + step / 500) + 0.01 * math.sin(step), 6)


def _write(path, steps):
    with path.open("w") as f:
        f.write("step,loss,lr,grad_norm,epoch\n")
        for s in steps:
            f.write(f"{s},{_loss(s)},0.0003,0.5,{s // 100}\n")
    return path


def _full_read(path):
    """What the reader must give below the bound: the latest row of each step, by step."""
    by_step = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            by_step[int(row["step"])] = float(row["loss"])
    steps = sorted(by_step)
    return np.array(steps), np.array([by_step[s] for s in steps])


def test_below_the_bound_the_curve_is_the_full_read_even_for_a_resumed_run(tmp_path):
    # steps 0..1199, then a resume from 800 that logs 800..1999 again (the later values win)
    path = tmp_path / "small.csv"
    with path.open("w") as f:
        f.write("step,loss,lr\n")
        for s in range(1200):
            f.write(f"{s},{_loss(s) + 1},0.0003\n")
        for s in range(800, 2000):
            f.write(f"{s},{_loss(s)},0.0003\n")
    steps, loss = _full_read(path)
    curve = read_log(path).curve
    assert np.array_equal(curve.steps, steps) and np.array_equal(curve.loss, loss)


def test_a_long_csv_becomes_a_bounded_curve_of_real_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", 100)
    path = _write(tmp_path / "long.csv", range(0, 50_000, 3))
    curve = read_log(path).curve
    assert 100 <= len(curve) <= 2 * 100 + 1
    assert curve.steps[0] == 0 and curve.steps[-1] == 49_998
    assert np.all(np.diff(curve.steps) > 0)
    assert np.array_equal(curve.loss, [_loss(int(s)) for s in curve.steps])   # real rows, not averages
    assert np.all(curve.lr == 0.0003)


def test_step_bins_stay_bounded_and_keep_the_latest_row_of_a_step():
    bins = StepBins(max_points=50)
    for s in range(200_000):
        bins.add((s, "first pass"))
        assert len(bins._bins) <= 2 * 50
    for s in range(100_000, 200_000):   # a resumed run re-does the second half
        bins.add((s, "second pass"))
    rows = bins.rows()
    assert len(rows) <= 2 * 50 + 1 and rows[0] == (0, "first pass")
    assert all(tag == "second pass" for s, tag in rows if s >= 100_000)
    assert bins.rows_read == 300_000


def test_step_bins_need_a_bound():
    with pytest.raises(ValueError):
        StepBins(0)
