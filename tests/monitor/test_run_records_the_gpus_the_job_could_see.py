"""`gpuwise run` records CUDA_VISIBLE_DEVICES as its command got it (meta ``cuda_visible_devices``): NVML lists every
GPU of the node, so without it the report cannot tell a GPU idle beside the job (rented with it) from another user's
on a shared node. Real `gpuwise run` subprocesses over the two-GPU replay (GPU 0 busy, GPU 1 holding 1 GiB)."""

from __future__ import annotations

import json
import sys

import pytest

from gpuwise.runlog import VISIBLE_DEVICES_ENV, VISIBLE_DEVICES_KEY, read_meta, read_visible_devices

from monitor_fakes import gpuwise

PY = sys.executable
SHOW_VISIBLE = f"import os; print('child saw', repr(os.environ.get({VISIBLE_DEVICES_ENV!r})))"


def run_with(env: dict, log) -> dict:
    """`gpuwise run --json` of a child that prints the CUDA_VISIBLE_DEVICES it got; its JSON, the child's line
    (``child_saw``) beside it."""
    r = gpuwise("run", "--log", str(log), "--interval", "0.1", "--json", "--", PY, "-c",
                SHOW_VISIBLE + "; import time; time.sleep(0.3)", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)     # the child's own stdout went to stderr
    out["child_saw"] = next(line for line in r.stderr.splitlines() if line.startswith("child saw"))
    return out


def test_run_records_cuda_visible_devices_and_its_report_counts_only_the_gpus_the_job_could_see(tmp_path, replay_env):
    log = tmp_path / "run.db"
    out = run_with(dict(replay_env, **{VISIBLE_DEVICES_ENV: "GPU-bbbb"}), log)
    assert out["child_saw"] == "child saw 'GPU-bbbb'"
    assert read_visible_devices(read_meta(log)) == (True, "GPU-bbbb")
    usage = out["report"]["usage"]
    assert usage["job_labels"] == ["1"] and usage["unseen_labels"] == ["0"]    # GPU 0 was busy, but not the job's


@pytest.mark.parametrize("value, recorded", [(None, "null"), ("", '""')])
def test_unset_is_recorded_apart_from_empty(tmp_path, replay_env, value, recorded):
    env = {k: v for k, v in replay_env.items() if k != VISIBLE_DEVICES_ENV}
    if value is not None:
        env[VISIBLE_DEVICES_ENV] = value
    log = tmp_path / "run.db"
    out = run_with(env, log)
    assert out["child_saw"] == f"child saw {value!r}"
    meta = read_meta(log)
    assert meta[VISIBLE_DEVICES_KEY] == recorded
    assert read_visible_devices(meta) == (True, value)


def test_a_hand_written_value_is_the_variable_itself():
    assert read_visible_devices({VISIBLE_DEVICES_KEY: "0,1"}) == (True, "0,1")
    assert read_visible_devices({VISIBLE_DEVICES_KEY: "3"}) == (True, "3")
    assert read_visible_devices({}) == (False, None)

