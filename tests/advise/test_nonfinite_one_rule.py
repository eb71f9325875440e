"""A log's NaN/inf verdict does not depend on its length: a resumed run that re-did steps from a checkpoint and
stopped short of the first attempt's last step was "not diverged" when the log was long enough to be thinned on
read (the reader's counter: the first attempt's later rows no longer count) and "diverged" when it was not (one
point per step, the first attempt's NaN rows kept)."""

from __future__ import annotations

import json

import pytest

from gpuwise.advise import downsample
from gpuwise.advise.failures import nonfinite_of
from gpuwise.advise.readers import read_log


def _resumed_short(path, n: int):
    first = [{"step": s, "loss": 2.0 - s / (2 * n) if s < 0.8 * n else "NaN"} for s in range(1, n + 1)]
    again = [{"step": s, "loss": 2.0 - s / (2 * n)} for s in range(int(0.7 * n), int(0.9 * n) + 1)]
    path.write_text("".join(json.dumps(r).replace('"NaN"', "NaN") + "\n" for r in first + again))
    return path


@pytest.mark.parametrize("points", [10_000, 50])      # not thinned, thinned
def test_a_resumed_run_stopping_short_gets_one_verdict_whatever_the_log_length(tmp_path, monkeypatch, points):
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", points)
    log = read_log(_resumed_short(tmp_path / "run.jsonl", 1000))
    assert (log.thinned_bin_steps > 1) == (points == 50)
    tally = nonfinite_of(log.curve)
    assert tally.nan_step is None and tally.skipped_count == 0
