"""`gpuwise run -- CMD` with real child processes: exit codes, signals passed on, the report at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from gpuwise.runlog import read_events, read_gpu_samples, read_meta

from monitor_fakes import GIB, gpuwise

PY = sys.executable


def no_driver_env() -> dict:
    env = dict(os.environ)
    env.pop("GPUWISE_MONITOR_BACKEND", None)
    return env


def test_without_a_driver_the_command_still_runs_and_its_exit_code_is_kept(tmp_path):
    log = tmp_path / "run.db"
    r = gpuwise("run", "--log", str(log), "--", PY, "-c", "print('child ran'); raise SystemExit(3)", env=no_driver_env())
    assert r.returncode == 3
    assert "child ran" in r.stdout
    no_driver_lines = [l for l in r.stderr.splitlines() if "driver" in l.lower()]
    assert no_driver_lines and "Traceback" not in r.stderr
    assert read_meta(log)["exit_code"] == "3" and read_gpu_samples(log) == []


def test_a_child_that_never_touches_a_gpu_is_sampled_and_reported(tmp_path, replay_env):
    log = tmp_path / "run.db"
    r = gpuwise("run", "--log", str(log), "--interval", "0.1", "--json", "--gpu-price", "¥15", "--",
                PY, "-c", "import time; print('working'); time.sleep(0.6)", env=replay_env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # the child's own output went to stderr
    assert "working" in r.stderr
    assert out["exit_code"] == 0 and out["sampled"] and out["samples"] >= 2
    assert out["report"]["gpu_name"] == "NVIDIA A100-SXM4-40GB"
    assert out["report"]["needed_peak_bytes"] == 12 * GIB
    assert "rtx-4090" in out["report"]["cheaper"]
    assert len(read_gpu_samples(log)) == 2 * out["samples"]


def test_exit_code_of_a_child_killed_by_a_signal_is_128_plus_the_signal(tmp_path):
    r = gpuwise("run", "--log", str(tmp_path / "r.db"), "--", PY, "-c", "import os; os.kill(os.getpid(), 9)",
                env=no_driver_env())
    assert r.returncode == 128 + 9


def test_a_missing_command_exits_127_in_one_line(tmp_path):
    r = gpuwise("run", "--log", str(tmp_path / "r.db"), "--", "no-such-command-xyz", env=no_driver_env())
    assert r.returncode == 127
    assert "no-such-command-xyz" in r.stderr and "Traceback" not in r.stderr


CHILD_WAITS_FOR_SIGNALS = textwrap.dedent("""
    import signal, sys, time
    def on(sig, frame):
        print("child got", signal.Signals(sig).name, flush=True)
        sys.exit(40 + sig)
    signal.signal(signal.SIGTERM, on)
    signal.signal(signal.SIGINT, on)
    print("ready", flush=True)
    time.sleep(60)
""")


def _signal_run(tmp_path: Path, sig: int) -> tuple[int, str, dict]:
    log = tmp_path / "run.db"
    # A new session: no controlling terminal, as under a scheduler, so SIGINT must be passed on too.
    proc = subprocess.Popen([PY, "-m", "gpuwise.cli.app", "run", "--log", str(log), "--", PY, "-c",
                             CHILD_WAITS_FOR_SIGNALS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=no_driver_env(), start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, read_meta(log)


def test_sigterm_to_gpuwise_is_passed_on_to_the_command(tmp_path):
    code, out, meta = _signal_run(tmp_path, signal.SIGTERM)
    assert "child got SIGTERM" in out
    assert code == 40 + signal.SIGTERM and meta["exit_code"] == str(code)


def test_sigint_without_a_terminal_is_passed_on_to_the_command(tmp_path):
    code, out, _ = _signal_run(tmp_path, signal.SIGINT)
    assert "child got SIGINT" in out and code == 40 + signal.SIGINT


FAKE_TORCH = textwrap.dedent("""
    # Stands in for torch on a machine without CUDA: what the hook reads at exit.
    class cuda:
        @staticmethod
        def is_initialized(): return True
        @staticmethod
        def device_count(): return 1
        @staticmethod
        def max_memory_allocated(d): return 3 * 2**30
        @staticmethod
        def max_memory_reserved(d): return 4 * 2**30
""")


def test_torch_hook_records_peak_allocated_and_reserved_at_exit(tmp_path, replay_env):
    fake = tmp_path / "fake_site"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(FAKE_TORCH)
    env = dict(replay_env, PYTHONPATH=str(fake))
    log = tmp_path / "run.db"
    r = gpuwise("run", "--log", str(log), "--interval", "0.1", "--torch-hook", "--json", "--",
                PY, "-c", "import torch, time; time.sleep(0.3)", env=env)
    assert r.returncode == 0, r.stderr
    (event,) = [e for e in read_events(log) if e["kind"] == "torch_memory"]
    data = json.loads(event["message"])
    assert data["devices"] == [{"device": 0, "max_allocated_bytes": 3 * 2**30, "max_reserved_bytes": 4 * 2**30}]
    peaks = json.loads(r.stdout)["report"]["usage"]["torch_peaks"]
    assert peaks[0]["max_reserved_bytes"] == 4 * 2**30


def test_the_report_at_the_end_names_cheaper_gpus_and_the_hook_stays_silent_without_torch(tmp_path, replay_env):
    log = tmp_path / "run.db"
    r = gpuwise("run", "--log", str(log), "--interval", "0.1", "--torch-hook", "--gpu-price", "¥15", "--",
                PY, "-c", "import time; print('plain'); time.sleep(0.4)", env=replay_env)
    assert r.returncode == 0 and "plain" in r.stdout
    assert "gpuwise report" in r.stderr and "rtx-4090" in r.stderr and "¥" in r.stderr
    assert "torch hook" not in r.stderr
    assert not [e for e in read_events(log) if e["kind"] == "torch_memory"]
