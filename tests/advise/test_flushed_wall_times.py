"""A buffered logger stamps the rows of one flush with the flush's time (equal, or a few µs apart), and the flushes a
training pace apart. Read row by row, a CSV flushed 100 rows at a time over 4 h of training at 0.45 s a step was
"written in a burst, not a training pace" (its wall times "span 3.9 h for 31,990 steps", 1.91 µs the median gap)
and went unpriced; a W&B-style JSONL flushed in pairs priced each step twice (0.9 s: a flush's time over the steps
since the row before, not since the flush before). Rows written together are one group now, its last row the step
its time belongs to (``wall_times.paced_rows``, ``row_gaps_s``); a real burst is still one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuwise.advise import read_log
from gpuwise.advise.wall_times import MIN_FLUSHED_ROW_GAP_S, burst_note, paced_rows, row_gaps_s

STEP_S = 0.45            # the run's real pace
LOG_EVERY_STEPS = 10
UNIX_START_S = 1_733_000_000.0
IN_FLUSH_GAP_S = 2e-6    # between the rows of one flush, as a logger writes them out


def _loss(step: int) -> float:
    return 2.0 + 8.0 * step ** -0.35


def _flushed_rows(rows: int, flush_rows: int, in_flush_gap_s: float) -> list[tuple[int, float, float]]:
    """(step, loss, wall time) of ``rows`` rows logged every ``LOG_EVERY_STEPS`` steps at ``STEP_S`` a step, written
    ``flush_rows`` at a time, stamped with the flush's time (after its last step) plus ``in_flush_gap_s`` a row."""
    steps = [LOG_EVERY_STEPS * (i + 1) for i in range(rows)]
    out = []
    for first in range(0, rows, flush_rows):
        flush = steps[first:first + flush_rows]
        flush_t_s = UNIX_START_S + STEP_S * flush[-1]
        out += [(s, _loss(s), flush_t_s + j * in_flush_gap_s) for j, s in enumerate(flush)]
    return out


def test_a_csv_flushed_a_hundred_rows_at_a_time_is_priced_at_its_pace(tmp_path, cli_json):
    path = tmp_path / "flushed.csv"
    path.write_text("step,loss,wall_time\n" + "".join(
        f"{s},{loss:.6f},{t:.6f}\n" for s, loss, t in _flushed_rows(3_200, 100, IN_FLUSH_GAP_S)))
    out = cli_json(["advise", str(path), "--gpu", "a100-80gb-sxm4", "--total-steps", "100000", "--json"])
    assert out["wall_times_unused"] is None
    assert out["step_time_s"] == pytest.approx(STEP_S, rel=1e-6)
    # the rest of the run on this GPU: its steps at the real pace, at the GPU's price per hour
    stay = out["plan_summary"]["stay"]
    assert stay["hours"] == pytest.approx((100_000 - 32_000) * STEP_S / 3600, abs=1e-3)


def test_a_jsonl_flushed_in_pairs_with_one_time_is_not_priced_twice(tmp_path, cli_json):
    path = tmp_path / "wandb_sync.jsonl"
    rows = _flushed_rows(301, 2, 0.0)   # an odd count: its row-by-row median gap is half a flush, "a pace"
    path.write_text("".join(json.dumps({"_step": i, "train/global_step": s, "train/loss": loss, "_timestamp": t})
                            + "\n" for i, (s, loss, t) in enumerate(rows)))
    out = cli_json(["advise", str(path), "--gpu", "a100-80gb-sxm4", "--total-steps", "10000", "--json"])
    assert out["wall_times_unused"] is None
    assert out["step_time_s"] == pytest.approx(STEP_S, rel=1e-6)


def test_the_curve_reads_its_step_time_between_flushes(tmp_path):
    path = tmp_path / "flushed.csv"
    path.write_text("step,loss,time\n" + "".join(
        f"{s},{loss:.6f},{t:.6f}\n" for s, loss, t in _flushed_rows(500, 50, IN_FLUSH_GAP_S)))
    assert read_log(str(path)).curve.step_time_s() == pytest.approx(STEP_S, rel=1e-6)


def test_flushed_rows_share_the_time_since_the_flush_before():
    rows = _flushed_rows(400, 100, IN_FLUSH_GAP_S)
    steps = np.array([s for s, _, _ in rows])
    times = np.array([t for _, _, t in rows])
    gaps_s = row_gaps_s(times)
    assert len(gaps_s) == len(times) - 1 and gaps_s.sum() == pytest.approx(np.ptp(times))
    # each later flush: 100 rows of 10 steps, 450 s of training, 4.5 s a row
    assert gaps_s[99:] == pytest.approx(np.full(300, STEP_S * LOG_EVERY_STEPS), rel=1e-6)
    ends_steps, ends_t_s = paced_rows(steps, times)
    assert list(ends_steps) == [1_000, 2_000, 3_000, 4_000]
    assert list(ends_t_s) == list(times[[99, 199, 299, 399]])
    assert burst_note(steps, times) is None


def test_a_row_per_group_reads_as_the_plain_gaps():
    times = UNIX_START_S + np.cumsum(np.array([0.0, 0.3, 0.5, 0.2, 7.0, 0.4]))
    steps = np.arange(len(times)) * 10
    assert row_gaps_s(times) == pytest.approx(np.diff(times))
    ends_steps, ends_t_s = paced_rows(steps, times)
    assert list(ends_steps) == list(steps) and list(ends_t_s) == list(times)


@pytest.mark.parametrize("rows_per_pause, pause_s", [
    (500, 5e-3),    # a converter stalled 5 ms every 500 rows: 20 µs a row, its time shared
    (10, 5e-3),     # a SummaryWriter pausing on its file every 10 events, on a slow disk: 0.5 ms a row shared
])
def test_a_burst_with_pauses_is_still_a_burst(rows_per_pause, pause_s):
    """Rows written 10 µs apart with a pause every so often: groups, but no training pace."""
    rows = np.arange(2_000)
    times = UNIX_START_S + 1e-5 * rows + pause_s * (rows // rows_per_pause)
    note = burst_note(rows * 10, times)
    assert note is not None and "written in a burst" in note
    assert float(np.median(row_gaps_s(times))) < MIN_FLUSHED_ROW_GAP_S
