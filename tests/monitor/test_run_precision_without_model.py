"""`gpuwise run --precision P -- CMD` without --model: the report at the end takes the datasheet ratio at P, as
`gpuwise report LOG --precision P` does (docs/report.md). Before: run warned "--precision has no effect without
--model" and reported at an unknown job's precision, though report reads the same flag."""

from __future__ import annotations

import json
import sys

from monitor_fakes import gpuwise

PY = sys.executable


def _run(tmp_path, replay_env, *flags):
    r = gpuwise("run", "--log", str(tmp_path / f"run{len(flags)}.db"), "--interval", "0.1", "--json", *flags, "--",
                PY, "-c", "import time; time.sleep(0.5)", env=replay_env)
    assert r.returncode == 0, r.stderr
    return r, json.loads(r.stdout)["report"]


def test_the_run_reports_at_the_precision_given_without_a_model(tmp_path, replay_env):
    r, given = _run(tmp_path, replay_env, "--precision", "amp-bf16")
    assert "has no effect without --model" not in r.stderr
    assert "amp-bf16" in given["right_sizing"]["method_basis"]
    _, unnamed = _run(tmp_path, replay_env)
    assert "amp-bf16" not in unnamed["right_sizing"]["method_basis"]
    ratio = {o["gpu"]: o["step_time_ratio"] for o in given["right_sizing"]["options"]}
    unnamed_ratio = {o["gpu"]: o["step_time_ratio"] for o in unnamed["right_sizing"]["options"]}
    assert any(abs(ratio[g] - unnamed_ratio[g]) > 1e-3 for g in ratio.keys() & unnamed_ratio.keys())
