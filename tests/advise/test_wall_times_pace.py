"""The step time read from a log's wall times (``wall_times.step_time_s``). Two flushes of a buffered logger (200 rows,
100 a flush, at 0.45 s a step) gave none and were said to be "no wall times": a pace needed three rows ending a
group, and a log with times that gave none was priced as one without. Where times are coarse (a row a step at
0.3 s, stamped in whole seconds) the median of the intervals' own paces read 1/3 s a step (1 s over 3 or 4 steps):
the time over the steps of the steady intervals is the pace, and pauses are still left out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuwise.advise import read_log
from gpuwise.advise.wall_times import PAUSE_RATIO, steady_pace_s, step_time_s, wall_times_unused

UNIX_START_S = 1_733_000_000.0
NO_WALL_TIMES_NOTE = "pass --step-time-s (the log has no wall times)"


def _loss(step: int) -> float:
    return 2.0 + 8.0 * step ** -0.35


def _write_csv(path, rows: list[tuple[int, float | None]]):
    """A CSV of (step, wall time) rows, a loss on each; an empty time cell where the time is None."""
    path.write_text("step,loss,wall_time\n" + "".join(
        f"{s},{_loss(s):.6f},{'' if t is None else f'{t:.6f}'}\n" for s, t in rows))
    return path


def test_a_log_flushed_twice_is_priced_at_the_pace_between_its_flushes(tmp_path, cli_json):
    step_s, every_steps, flush_rows = 0.45, 10, 100
    steps = [every_steps * (i + 1) for i in range(2 * flush_rows)]
    # each row stamped with its flush's time (after the flush's last step), 2 µs apart as the logger writes them out
    rows = [(s, UNIX_START_S + step_s * steps[(i // flush_rows + 1) * flush_rows - 1] + 2e-6 * (i % flush_rows))
            for i, s in enumerate(steps)]
    out = cli_json(["advise", str(_write_csv(tmp_path / "two_flushes.csv", rows)), "--gpu", "a100-80gb-sxm4",
                    "--total-steps", "100000", "--json"])
    assert out["wall_times_unused"] is None
    assert out["step_time_s"] == pytest.approx(step_s, rel=1e-6)
    assert out["plan_summary"]["stay"]["hours"] == pytest.approx((100_000 - steps[-1]) * step_s / 3600, abs=1e-3)


def test_a_log_whose_times_are_too_few_says_why_not_that_it_has_none(tmp_path, cli_json):
    # two plain rows are one interval: no step time, as before; but the log has wall times, and says so
    rows = [(s, UNIX_START_S + 0.5 * s if s in (10, 60) else None) for s in range(10, 70, 10)]
    path = _write_csv(tmp_path / "two_times.csv", rows)
    assert read_log(path).curve.step_time_s() is None
    out = cli_json(["advise", str(path), "--gpu", "a100-80gb-sxm4", "--total-steps", "1000", "--json"])
    assert out["step_time_s"] is None
    assert "wall times on 2 rows: too few" in out["wall_times_unused"]
    assert out["pricing_note"] == out["wall_times_unused"] != NO_WALL_TIMES_NOTE


@pytest.mark.parametrize("stamp", [math.floor, round])
def test_whole_second_times_read_the_steps_pace_not_a_third_of_a_second(tmp_path, stamp):
    step_s = 0.3
    rows = [(s, float(stamp(UNIX_START_S + step_s * s))) for s in range(1, 3001)]
    # stamped in whole seconds, the pace is known to a second over the log's span
    span_s = step_s * 3000
    assert read_log(_write_csv(tmp_path / "seconds.csv", rows)).curve.step_time_s() == pytest.approx(
        step_s, abs=2 * step_s / span_s)


def test_pauses_and_a_restart_are_left_out_of_the_pace():
    step_s, every_steps = 0.5, 10
    steps = np.arange(every_steps, 4_001, every_steps)
    times = UNIX_START_S + step_s * steps
    times += 120.0 * (steps // 500)             # a 120 s eval every 500 steps
    times[steps > 2_000] += 900.0               # a restart at step 2,000, 15 min to come back
    assert step_time_s(steps, times) == pytest.approx(step_s)
    assert wall_times_unused(steps, times) is None


def test_the_steady_pace_is_the_time_over_the_steps_of_the_intervals_near_the_median():
    # whole seconds over 3 or 4 steps (median 1/3 s), a 60 s pause (20 s a step), 10 steps in 10 ms (1 ms a step)
    dt_s = np.array([1.0, 1.0, 1.0, 1.0, 60.0, 0.01])
    dsteps = np.array([3.0, 4.0, 3.0, 3.0, 3.0, 10.0])
    assert 20.0 > PAUSE_RATIO / 3 and 1e-3 < 1 / (3 * PAUSE_RATIO)   # both out of the steady pace
    assert steady_pace_s(dt_s, dsteps) == pytest.approx(4.0 / 13.0)
