"""Trial 3: the gradient-noise fields ``NoiseScaleMeter.log_fields`` names are read from a CSV or JSONL log as from
a run log (before: only a run log's, and advise told a CSV holding them that "this log does not hold" them)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuwise.advise import read_log
from gpuwise.advise.noise_scale import NoiseScaleMeter
from gpuwise.runlog import RunLog

B_SMALL, B_BIG, TRACE_SIGMA, GRAD_SQ = 32, 256, 100.0, 1.0     # B_simple = tr Σ / |G|² = 100


def _rows(n: int = 400) -> list[dict]:
    rng = np.random.default_rng(3)
    rows = []
    for step in range(1, n + 1):
        small = (GRAD_SQ + TRACE_SIGMA / B_SMALL) * (1 + rng.normal(0, 0.2))
        big = (GRAD_SQ + TRACE_SIGMA / B_BIG) * (1 + rng.normal(0, 0.05))
        rows.append({"step": step, "loss": 2 + np.exp(-step / 100) + rng.normal(0, 0.05), "t_s": 0.3 * step,
                     **NoiseScaleMeter.log_fields(small, B_SMALL, big, B_BIG)})
    rows[10]["grad_sq_norm_small"] = float("nan")      # an fp16 overflow: the row's sample is left out
    return rows


def _write(tmp_path, kind: str, rows: list[dict]) -> str:
    if kind == "runlog":
        path = tmp_path / "run.db"
        with RunLog(path) as log:
            for r in rows:
                log.log_train(r["step"], **{k: v for k, v in r.items() if k != "step"})
        return str(path)
    if kind == "csv":
        path = tmp_path / "log.csv"
        names = list(rows[0])
        path.write_text("\n".join([",".join(names), *(",".join(str(r[n]) for n in names) for r in rows)]) + "\n")
        return str(path)
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_noise_columns_of_a_csv_or_jsonl_read_as_a_run_logs(tmp_path, kind):
    rows = _rows()
    noise = read_log(_write(tmp_path, kind, rows)).noise
    recorded = read_log(_write(tmp_path, "runlog", rows)).noise
    assert noise is not None and len(noise) == len(rows) - 1 and 11 not in noise.steps
    for field in ("steps", "g_small_sq", "g_big_sq", "b_small", "b_big"):
        np.testing.assert_allclose(getattr(noise, field), getattr(recorded, field))


def test_a_csv_with_noise_columns_gets_the_noise_scale_in_advise(tmp_path, cli_json):
    out = cli_json(["advise", _write(tmp_path, "csv", _rows()), "--json"])
    assert out["noise_scale"]["b_small"] == B_SMALL and out["noise_scale"]["b_big"] == B_BIG
    assert out["noise_scale"]["b_simple"] == pytest.approx(TRACE_SIGMA / GRAD_SQ, rel=0.15)
