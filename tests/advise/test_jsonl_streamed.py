"""A JSON Lines log is read in memory that does not grow with its lines: every parsed record was kept in a list
before the curve was built (its keys pick the columns), so a log of millions of lines was held whole although
the curve is thinned to a few hundred points. It is now read twice, keys first, then streamed."""

from __future__ import annotations

import json

from gpuwise.advise import downsample
from gpuwise.advise.readers import read_log
from tests.advise.memory import peak_bytes_reading


def _jsonl(path, rows: int):
    with path.open("w") as f:
        f.writelines(json.dumps({"step": s, "loss": 3.0 / (1 + s / 100), "lr": 1e-3}) + "\n" for s in range(rows))
    return path


def test_a_long_jsonl_log_is_read_in_memory_that_does_not_grow_with_its_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", 50)
    small_rows, big_rows = 4_000, 16_000
    read_log(_jsonl(tmp_path / "small.jsonl", small_rows))      # first-use allocations done
    small_peak, small = peak_bytes_reading(tmp_path / "small.jsonl")
    big_peak, big = peak_bytes_reading(_jsonl(tmp_path / "big.jsonl", big_rows))
    assert big.rows_read == big_rows and big.thinned_bin_steps > small.thinned_bin_steps > 1
    # before: every record's dict kept (several hundred bytes a line)
    assert big_peak - small_peak < 16 * (big_rows - small_rows), (small_peak, big_peak)
    assert big.curve.steps[0] == 0 and big.curve.steps[-1] >= big_rows - big.thinned_bin_steps


def test_keys_that_first_appear_late_still_pick_the_columns_and_a_cut_last_line_is_skipped_once(tmp_path):
    path = tmp_path / "late.jsonl"
    lines = [json.dumps({"step": s, "lr": 1e-3}) for s in range(5)]
    lines += [json.dumps({"step": s, "loss": 2.0 - s / 100}) for s in range(5, 40)]
    path.write_text("\n".join(lines) + '\n{"step": 40, "loss": 1.')       # a live log, cut mid-line
    log = read_log(path)
    assert log.loss_name == "loss" and list(log.curve.steps) == list(range(5, 40))
