"""What a new user's trial of `run`, `watch` and `exporter` found (replay backend, real subprocesses and HTTP):
the sampling interval recorded is the one used, every writer records the same meta, the exporter answers
on /metrics only and in whole MiB, the live view keeps its numbers readable at 80 columns, and run's report
options are checked before the command starts."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from gpuwise.runlog import read_meta

from monitor_fakes import GIB, gpuwise, two_gpu_frames, write_frames

PY = sys.executable
META_KEYS = {"host", "backend", "driver_version", "interval_s", "gpuwise_version", "start_t_s", "end_t_s"}


@pytest.mark.parametrize("argv", [
    ["watch", "--count", "2"],
    ["exporter", "--port", "0"],
    ["run", "--", PY, "-c", "open('ran', 'w').write('x')"],
])
def test_an_interval_faster_than_10_hz_is_refused_before_anything_starts(tmp_path, replay_env, argv):
    # the defect: --interval 0.01 was sampled at 0.1 s while the run log recorded 0.01
    log = tmp_path / "fast.db"
    r = gpuwise(*argv[:1], "--interval", "0.01", "--log", str(log), *argv[1:], env=replay_env, cwd=tmp_path,
                timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--interval" in r.stderr and "0.1" in r.stderr and "0.01" in r.stderr and "Traceback" not in r.stderr
    assert not log.exists() and not (tmp_path / "ran").exists()


def test_watch_and_run_logs_record_the_same_meta_keys(tmp_path, replay_env):
    # the defect: watch --log and exporter --log wrote only schema_version
    watched = tmp_path / "watch.db"
    r = gpuwise("watch", "--count", "2", "--interval", "0.1", "--log", str(watched), env=replay_env)
    assert r.returncode == 0, r.stderr
    ran = tmp_path / "run.db"
    r = gpuwise("run", "--log", str(ran), "--interval", "0.1", "--", PY, "-c", "pass", env=replay_env)
    assert r.returncode == 0, r.stderr
    watch_meta, run_meta = read_meta(watched), read_meta(ran)
    assert META_KEYS <= set(watch_meta) and META_KEYS <= set(run_meta)
    for key in ("host", "backend", "driver_version", "interval_s", "gpuwise_version"):
        assert watch_meta[key] == run_meta[key], key
    assert watch_meta["backend"] == "replay" and float(watch_meta["interval_s"]) == 0.1
    assert float(watch_meta["end_t_s"]) >= float(watch_meta["start_t_s"])


def _start_exporter(tmp_path, env, log=None):
    argv = [PY, "-m", "gpuwise.cli.app", "exporter", "--port", "0", "--interval", "0.1"]
    proc = subprocess.Popen(argv + (["--log", str(log)] if log else []), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()     # gpuwise exporter: serving http://127.0.0.1:PORT/metrics (Ctrl-C to stop)
    found = re.search(r":(\d+)/metrics", line)
    assert found, line + proc.stderr.read()
    return proc, int(found.group(1))


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_exporter_serves_metrics_on_metrics_in_whole_mib_and_404_elsewhere(tmp_path, replay_env):
    frames = two_gpu_frames(3)
    for frame in frames:
        frame[0]["memory_used_bytes"] = 11 * GIB + 123_457   # not a whole MiB, as a real GPU reports
    env = dict(replay_env, GPUWISE_MONITOR_BACKEND=f"replay:{write_frames(tmp_path / 'f.json', frames)}")
    log = tmp_path / "exporter.db"
    proc, port = _start_exporter(tmp_path, env, log)
    try:
        status, metrics = _get(f"http://127.0.0.1:{port}/metrics")
        root_status, root = _get(f"http://127.0.0.1:{port}/")
        other_status, _ = _get(f"http://127.0.0.1:{port}/favicon.ico")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert status == 200 and "DCGM_FI_DEV_GPU_UTIL" in metrics
    assert root_status == 200 and "/metrics" in root and "DCGM_FI" not in root
    assert other_status == 404
    used = re.search(r'^DCGM_FI_DEV_FB_USED\{[^}]*gpu="0"[^}]*\} (\S+)$', metrics, re.M).group(1)
    free = re.search(r'^DCGM_FI_DEV_FB_FREE\{[^}]*gpu="0"[^}]*\} (\S+)$', metrics, re.M).group(1)
    assert float(used) == (11 * GIB + 123_457) // 2**20 and float(used).is_integer()
    assert float(free).is_integer()
    assert proc.returncode == 0
    assert META_KEYS <= set(read_meta(log))


def test_watch_at_80_columns_shrinks_the_sparklines_not_the_numbers(replay_env):
    # the defect: once 16 samples of history grew, power and temperature were squeezed to "1…" and "5…"
    env = dict(replay_env, COLUMNS="80")
    r = gpuwise("watch", "--interval", "0.1", "--count", "20", env=env)
    assert r.returncode == 0, r.stderr
    row = next(line for line in reversed(r.stdout.splitlines()) if line.startswith("0 "))
    assert "150 W" in row and "50 C" in row and "…" not in row
    assert re.search(r"[▁▂▃▄▅▆▇█]{3,}", row), row    # the history is still there, only shorter
    assert max(len(line) for line in r.stdout.splitlines()) <= 80


@pytest.mark.parametrize("option, value, says", [
    ("--gpu-price", "abc", "not an amount of money"),
    ("--gpu-price", "15ZZZ", "ZZZ"),
    ("--provider", "nosuchprov", "unknown provider"),
])
def test_run_checks_its_report_options_before_the_command_starts(tmp_path, replay_env, option, value, says):
    # the defect: the whole command ran and only the report failed, with exit code 0
    log = tmp_path / "run.db"
    r = gpuwise("run", "--log", str(log), option, value, "--", PY, "-c", "open('ran', 'w').write('x')",
                env=replay_env, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and option in r.stderr and says in r.stderr
    assert not (tmp_path / "ran").exists() and not log.exists()
