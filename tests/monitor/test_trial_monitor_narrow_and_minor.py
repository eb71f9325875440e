"""What a new user's trial of `watch` and `exporter` found: the process table cut PIDs, labels and users on a
narrow terminal; a closed pipe ended `watch` with exit 1 and no log; replay errors said too little; a run log
replayed claimed the driver "replay" and no processes under a procs count of 1; a filter turned a MIG
parent's "-" into "0"; the exporter answered HEAD with 405; --read-timeout 0 and --bind '' were unclear."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from monitor_fakes import gpuwise, write_frames

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.monitor.exporter import serve

MIG_H100 = Path(__file__).parent.parent / "fixtures" / "replay_mig_a100_h100.json"
PROCESSES = {"4242": ("0/mig0", "alice"), "5151": ("0/mig1", "bob"), "6161": ("1", "carol")}


def _env(frames: Path | str, columns: int = 100) -> dict:
    return dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}", COLUMNS=str(columns))


@pytest.mark.parametrize("columns", [24, 30, 34, 38, 44, 60])
def test_a_narrow_terminal_never_cuts_a_pid_label_or_user_and_says_what_of_the_command_gave_way(columns):
    # the defect: at 30-38 columns "424" for 4242, "0/mig" for 0/mig0, "alic", COMMAND dropped silently
    r = gpuwise("watch", "--count", "1", env=_env(MIG_H100, columns))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    tokens = " ".join(lines).replace("│", " ").split()
    for pid, (label, user) in PROCESSES.items():
        assert pid in tokens and label in tokens and user in tokens, (pid, label, user, r.stdout)
    out = " ".join(r.stdout.split())
    whole = "python train.py --lr 3e-4" in out and "torchrun --nproc 1 ft.py" in out
    assert whole or f"COMMAND left out to fit {columns} columns" in out or f"COMMAND cut to fit {columns}" in out
    assert "COM MAN" not in out


def test_a_wide_terminal_shows_each_command_whole_and_says_nothing_gave_way():
    r = gpuwise("watch", "--count", "1", env=_env(MIG_H100, 120))
    assert "python train.py --lr 3e-4" in r.stdout and "COMMAND" in r.stdout and "to fit" not in r.stdout


def test_a_closed_pipe_ends_watch_quietly_with_its_log_complete(tmp_path):
    # the defect: `watch | head -1` exited 1 with nothing on stderr (and, there, no log)
    log = tmp_path / "w.db"
    watch = subprocess.Popen([sys.executable, "-m", "gpuwise.cli.app", "watch", "--count", "50", "--interval", "0.1",
                              "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(MIG_H100))
    watch.stdout.readline()
    watch.stdout.close()            # as `head -1` does
    _, err = watch.communicate(timeout=60)
    assert watch.returncode == 0 and err == b""
    with sqlite3.connect(log) as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        assert db.execute("SELECT COUNT(*) FROM gpu_samples").fetchone()[0] >= 4
    assert meta.get("end_t_s")


@pytest.mark.parametrize("sample, says", [
    ({"gpu_index": 0, "lost": "yes"}, "frame 1: sample 1: lost is 'yes', not a number"),
    ({"gpu_index": 0, "memory_used_bytes": 50, "memory_total_bytes": 10},
     "memory_used_bytes 50 B is more than memory_total_bytes 10 B"),
])
def test_a_bad_replay_sample_is_named_in_words_that_tell_what_is_wrong(tmp_path, sample, says):
    # the defects: "invalid literal for int() with base 10: 'yes'"; "0.0 KiB is more than 0.0 KiB"
    frames = write_frames(tmp_path / "bad.json", [[sample]])
    r = gpuwise("watch", "--count", "1", env=_env(frames))
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_an_empty_replay_file_is_said_to_be_empty(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    r = gpuwise("watch", "--count", "1", env=_env(empty))
    assert r.returncode == 2 and "the file is empty" in r.stderr, r.stderr


def test_a_run_log_replays_with_its_driver_and_claims_no_process_list(tmp_path):
    # the defects: "driver replay" though the log's meta records 550.54.15; procs 1 above "no compute processes"
    log = tmp_path / "w.db"
    assert gpuwise("watch", "--count", "2", "--interval", "0.1", "--log", str(log), env=_env(MIG_H100)).returncode == 0
    r = gpuwise("watch", "--count", "1", env=_env(log))
    assert r.returncode == 0, r.stderr
    assert "driver 550.54.15" in r.stdout and "no compute processes" not in r.stdout
    snapshot = json.loads(gpuwise("watch", "--json", env=_env(log)).stdout)
    assert snapshot["driver_version"] == "550.54.15" and snapshot["processes"] is None


def test_a_filter_leaves_the_mig_parent_procs_column_unknown():
    # the defect: with --user the parent GPU's procs changed from "-" to "0"
    r = gpuwise("watch", "--count", "1", "--user", "alice", env=_env(MIG_H100, 120))
    row = next(line for line in r.stdout.splitlines() if line.startswith("0 "))
    assert row.rstrip().endswith("-"), row


def test_the_exporter_answers_head_as_get_without_a_body():
    # the defect: HEAD /metrics answered 405 (Go's promhttp answers it as GET without the body)
    sampler = Sampler(ReplayBackend.from_file(MIG_H100))
    sampler.sample_once()
    server, _ = serve(sampler, port=0, bind="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as resp:
            head_status, head_length, head_body = resp.status, resp.headers["Content-Length"], resp.read()
        with urllib.request.urlopen(url, timeout=60) as resp:
            body = resp.read()
    finally:
        server.shutdown()
        server.server_close()
    assert head_status == 200 and head_body == b"" and body and int(head_length) > 0


@pytest.mark.parametrize("args, says", [
    (("--read-timeout", "0"), "--read-timeout: the read timeout must be a number of seconds > 0"),
    (("--bind", ""), "--bind must be an address to listen on"),
])
def test_bad_exporter_options_are_one_line_naming_the_option(args, says):
    r = gpuwise("exporter", *args, env=_env(MIG_H100))
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
