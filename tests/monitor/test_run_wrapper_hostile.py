"""`gpuwise run`, `watch` and `exporter` when things go wrong: every signal reaches the command's whole
process group, the command's exit code survives a failing report or a full disk, bad options and
start-up errors exit 2 with one line."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from monitor_fakes import GIB, gpuwise, write_frames

PY = sys.executable

# The command and a grandchild it starts (as torchrun starts workers) each record the signal they got.
FAMILY = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    sig = int(sys.argv[1]); out = sys.argv[2]
    def on(s, frame, who):
        open(f"{out}.{who}", "w").write(signal.Signals(s).name)
        sys.exit(40 + s if who == "child" else 0)
    if len(sys.argv) > 3:
        signal.signal(sig, lambda s, f: on(s, f, "grandchild"))
        open(f"{out}.grandchild-ready", "w").close()
        time.sleep(60)
    else:
        signal.signal(sig, lambda s, f: on(s, f, "child"))
        grandchild = subprocess.Popen([sys.executable, __file__, str(sig), out, "grand"])
        while not os.path.exists(f"{out}.grandchild-ready"):
            time.sleep(0.01)
        print("ready", flush=True)
        time.sleep(60)
""")


def _no_driver_env() -> dict:
    env = dict(os.environ)
    env.pop("GPUWISE_MONITOR_BACKEND", None)
    return env


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGQUIT])
def test_every_catchable_signal_reaches_the_commands_process_group(tmp_path, sig):
    script = tmp_path / "family.py"
    script.write_text(FAMILY)
    out = tmp_path / "got"
    proc = subprocess.Popen([PY, "-m", "gpuwise.cli.app", "run", "--log", str(tmp_path / "run.db"), "--", PY,
                             str(script), str(int(sig)), str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_no_driver_env(), start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)  # a loaded CI machine: the test waits on behaviour, not speed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 40 + sig, err
    assert (tmp_path / "got.child").read_text() == sig.name
    assert (tmp_path / "got.grandchild").read_text() == sig.name


def test_exit_code_survives_a_report_that_fails(tmp_path):
    # the report fails on a damaged catalog file of the user's (a bad replay frame is refused before the run now,
    # and a damaged calibration file no longer stops a report that need not apply it)
    frames = write_frames(tmp_path / "frames.json", [[{"gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB",
                                                      "utilization_pct": 30, "memory_used_bytes": GIB,
                                                      "memory_total_bytes": 40 * GIB}]])
    config = tmp_path / "config"
    config.mkdir()
    (config / "catalog.toml").write_text("this is [not toml\n")
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}", GPUWISE_CONFIG_DIR=str(config))
    r = gpuwise("run", "--log", str(tmp_path / "run.db"), "--interval", "0.1", "--", PY, "-c",
                "import time; time.sleep(0.3); raise SystemExit(9)", env=env)
    assert r.returncode == 9, r.stderr
    assert "Traceback" not in r.stderr and "no report" in r.stderr, r.stderr


def test_exit_code_survives_a_full_run_log_disk(tmp_path):
    def small_files() -> None:  # writes past 80 kB fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (80_000, 80_000))

    frames = write_frames(tmp_path / "frames.json", [[{"gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB",
                                                      "utilization_pct": 50, "memory_used_bytes": GIB,
                                                      "memory_total_bytes": 40 * GIB}]])
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}")
    r = gpuwise("run", "--log", str(tmp_path / "run.db"), "--interval", "0.1", "--", PY, "-c",
                "import time; time.sleep(0.5); raise SystemExit(9)", env=env, preexec_fn=small_files)
    assert r.returncode == 9, r.stderr
    assert "Traceback" not in r.stderr and "warning" in r.stderr


@pytest.mark.parametrize("args", [
    ["run", "--interval", "inf", "--", PY, "-c", "pass"],
    ["run", "--interval", "nan", "--", PY, "-c", "pass"],
    ["run", "--interval", "0", "--", PY, "-c", "pass"],
    ["exporter", "--interval", "nan", "--port", "0"],
    ["exporter", "--port", "70000"],
    ["exporter", "--port", "-1"],
    ["exporter", "--bind", "no.such.host.invalid", "--port", "0"],
    ["watch", "--count", "-1"],
], ids=["run-inf", "run-nan", "run-zero", "exporter-nan", "port-70000", "port-negative", "bad-bind", "watch-count"])
def test_bad_options_exit_2_with_one_line(tmp_path, replay_env, args):
    r = gpuwise(*args, env=replay_env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("gpuwise: error:"), r.stderr


def test_exporter_on_a_port_in_use_exits_2_with_one_line(tmp_path, replay_env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        r = gpuwise("exporter", "--port", str(port), env=replay_env, timeout=120)
    assert r.returncode == 2 and time.monotonic() - started < 120
    assert len(r.stderr.strip().splitlines()) == 1 and "in use" in r.stderr, r.stderr
