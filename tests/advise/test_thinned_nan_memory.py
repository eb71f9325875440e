"""A long log thinned on read counts its NaN/inf losses before thinning, in memory that does not grow with its
rows: the tally kept every NaN/inf step in a set, so a huge log that is mostly NaN held every step number
(a 20,000-row CSV peaked at 3.3 MB, 80,000 rows at 8.8 MB; the thinned curve itself is a few hundred rows)."""

from __future__ import annotations

from gpuwise.advise import downsample
from gpuwise.advise.readers import read_log
from tests.advise.memory import peak_bytes_reading

FINITE_ROWS = 50


def _mostly_nan_csv(path, rows: int):
    with path.open("w") as f:
        f.write("step,loss\n")
        f.writelines(f"{s},{2.0 - s / 1000 if s < FINITE_ROWS else 'nan'}\n" for s in range(rows))
    return path


def test_a_mostly_nan_log_is_tallied_in_memory_that_does_not_grow_with_its_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", 50)
    small_rows, big_rows = 4_000, 16_000
    read_log(_mostly_nan_csv(tmp_path / "small.csv", small_rows))   # first-use allocations (imports, caches) done
    small_peak, small = peak_bytes_reading(tmp_path / "small.csv")
    big_peak, big = peak_bytes_reading(_mostly_nan_csv(tmp_path / "big.csv", big_rows))
    assert big.thinned_bin_steps > small.thinned_bin_steps > 1 and big.rows_read == big_rows
    # before: about 90 bytes more per extra row (a set of steps, then a sorted list and an array of them)
    assert big_peak - small_peak < 16 * (big_rows - small_rows), (small_peak, big_peak)
    for log in (small, big):   # the tally is still every row's
        tally = log.curve.nonfinite
        assert tally.nan_step == FINITE_ROWS and tally.skipped_count == 0


def test_a_thinned_log_with_more_skipped_steps_than_listed_counts_them_all(tmp_path, monkeypatch, cli_json):
    monkeypatch.setattr(downsample, "MAX_CURVE_POINTS", 50)
    bad = set(range(100, 3000, 50))   # 58 skipped steps, more than the JSON lists
    path = tmp_path / "fp16.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{'inf' if s in bad else 2.0 - s / 10_000}\n" for s in range(3000)))
    out = cli_json(["advise", str(path), "--json"])
    assert out["thinned"]["bin_steps"] > 1 and out["nan_step"] is None
    listed = out["skipped_nonfinite"]["steps"]
    assert out["skipped_nonfinite"]["count"] == len(bad) and 0 < len(listed) < len(bad)
    assert listed == sorted(bad)[:len(listed)]
