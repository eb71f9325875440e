"""A run log keeps how many processes each device had, not whose: `watch --user alice` (or `--pid`) over its
replay was titled "only user alice" while its procs column counted bob's process too. Such a filter cannot
apply there, and `watch` says so in one line (exit 2), leaving no run log of its own behind; --gpu still
narrows a run log's replay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuwise.monitor import ReplayBackend
from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.watch_filter import WatchFilter

from monitor_fakes import gpuwise

FIXTURE = Path(__file__).parents[1] / "fixtures" / "replay_mig_a100_h100.json"


@pytest.fixture
def watch_log(tmp_path) -> Path:
    """A run log `watch --log` wrote over the MIG fixture: alice on 0/mig0, bob on 0/mig1, carol on GPU 1."""
    log = tmp_path / "w.db"
    r = gpuwise("watch", "--count", "1", "--log", str(log),
                env=dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{FIXTURE}"))
    assert r.returncode == 0, r.stderr
    return log


def _over(log: Path) -> dict:
    return dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{log}", COLUMNS="120")


@pytest.mark.parametrize("options", [("--count", "1", "--user", "alice"), ("--json", "--user", "alice"),
                                     ("--count", "1", "--pid", "4242")])
def test_a_process_filter_over_a_run_log_replay_is_refused_in_one_line(watch_log, options):
    r = gpuwise("watch", *options, env=_over(watch_log))
    assert r.returncode == 2
    assert r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert f"{options[-2]} {options[-1]}: {watch_log} lists no processes" in line and "cannot apply" in line


def test_the_refused_watch_leaves_no_run_log_of_its_own(watch_log, tmp_path):
    mine = tmp_path / "mine.db"
    r = gpuwise("watch", "--count", "1", "--user", "alice", "--log", str(mine), env=_over(watch_log))
    assert r.returncode == 2 and not mine.exists()


def test_a_gpu_filter_still_narrows_a_run_log_replay(watch_log):
    r = gpuwise("watch", "--count", "1", "--gpu", "1", env=_over(watch_log))
    assert r.returncode == 0, r.stderr
    assert "only GPU 1" in r.stdout and "H100" in r.stdout and "A100" not in r.stdout


def test_the_filter_rule_needs_a_process_list_only_for_users_and_pids(watch_log):
    backend = ReplayBackend.from_file(watch_log)
    backend.sample()
    assert backend.processes() is None
    WatchFilter(gpu_indices=frozenset({0})).check_applies(backend.processes(), backend.source)
    WatchFilter(users=frozenset({"alice"})).check_applies([], "frames")       # a list, empty or not: it applies
    with pytest.raises(MonitorError, match="--user alice --pid 7: .* cannot apply"):
        WatchFilter(users=frozenset({"alice"}), pids=frozenset({7})).check_applies(None, backend.source)
