"""`gpuwise watch` and `gpuwise exporter` over the replay backend; the exporter over real HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.monitor.exporter import serve
from gpuwise.monitor.live import sparkline
from gpuwise.runlog import read_gpu_samples

from monitor_fakes import GIB, gpuwise, two_gpu_frames


def test_watch_json_prints_one_snapshot_of_every_gpu(replay_env):
    r = gpuwise("watch", "--json", env=replay_env)
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    assert snap["available"] and snap["driver_version"] == "550.54.15"
    gpu0, gpu1 = snap["gpus"]
    assert gpu0["memory_used_bytes"] == 11 * GIB and gpu1["utilization_pct"] is None


def test_watch_without_a_driver_says_so_in_one_line():
    env = {k: v for k, v in os.environ.items() if k != "GPUWISE_MONITOR_BACKEND"}
    r = gpuwise("watch", "--count", "1", env=env)
    assert r.returncode == 1 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "driver" in r.stderr


def test_watch_shows_history_and_a_lost_gpu_and_writes_the_log(tmp_path, replay_env):
    log = tmp_path / "watch.db"
    r = gpuwise("watch", "--count", "4", "--interval", "0.1", "--log", str(log), env=replay_env)
    assert r.returncode == 0, r.stderr
    assert "LOST" in r.stdout and "A100-SXM4-40GB" in r.stdout
    assert re.search("[▁▂▃▄▅▆▇█]{3}", r.stdout)
    assert len(read_gpu_samples(log)) == 8


def test_sparkline_scales_to_the_top_and_leaves_gaps_for_unknown_values():
    assert sparkline([0, 50, 100, None], 100) == "▁▅█ "


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as resp:
        return resp.read().decode()


def test_exporter_serves_dcgm_named_metrics_and_skips_unsupported_fields():
    sampler = Sampler(ReplayBackend(two_gpu_frames(4)))
    sampler.sample_once()
    server, _ = serve(sampler, port=0, bind="127.0.0.1")
    try:
        text = _scrape(server.server_address[1])
    finally:
        server.shutdown()
    assert re.search(r'DCGM_FI_DEV_GPU_UTIL\{.*gpu="0".*\} 30\.0', text)
    assert 'UUID="GPU-aaaa"' in text and 'modelName="NVIDIA A100-SXM4-40GB"' in text
    assert re.search(r'DCGM_FI_DEV_FB_USED\{.*gpu="0".*\} 11264\.0', text)  # MiB, as DCGM
    assert re.search(r'DCGM_FI_DEV_FB_FREE\{.*gpu="0".*\} 29696\.0', text)
    assert not re.search(r'DCGM_FI_DEV_GPU_UTIL\{.*gpu="1"', text)  # GPU 1 reports no utilisation
    assert re.search(r'gpuwise_gpu_lost\{.*gpu="1".*\} 0\.0', text)


def test_exporter_command_serves_until_sigterm(replay_env):
    proc = subprocess.Popen([sys.executable, "-m", "gpuwise.cli.app", "exporter", "--port", "0", "--interval", "0.1",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=replay_env)
    try:
        head = ""
        while True:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            head += line
            if line.startswith("}"):
                break
        port = json.loads(head)["port"]
        text = _scrape(port)
        assert "DCGM_FI_DEV_POWER_USAGE" in text and "DCGM_FI_DEV_SM_CLOCK" in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_with_json_watch_and_exporter_print_their_error_on_stderr_only():
    env = {k: v for k, v in os.environ.items() if k != "GPUWISE_MONITOR_BACKEND"}
    for args in (("watch", "--json"), ("exporter", "--port", "0", "--json")):
        r = gpuwise(*args, env=env)
        assert r.returncode == 1 and r.stdout == "", (args, r.stdout)
        assert len(r.stderr.strip().splitlines()) == 1 and "driver" in r.stderr
