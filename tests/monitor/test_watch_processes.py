"""`gpuwise watch` lists the processes on each GPU as nvitop does: PID, user, GPU memory and command."""

from __future__ import annotations

import getpass
import json
import os

from gpuwise.monitor import ReplayBackend
from gpuwise.monitor.nvml import NvmlBackend

from monitor_fakes import GIB, FakeGpu, FakeNvml, gpuwise, write_frames

ALICE = {"pid": 424242, "used_memory_bytes": 11 * GIB, "user": "alice", "command": "python train.py --lr 3e-4"}


def frames_with_processes(own_pid: int) -> list[list[dict]]:
    gpu0 = {"gpu_index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 30,
            "memory_used_bytes": 13 * GIB, "memory_total_bytes": 40 * GIB,
            "processes": [ALICE,                                                   # recorded with the frame
                          {"pid": own_pid, "used_memory_bytes": 1 * GIB},          # a live local process
                          {"pid": 2_000_000_000, "used_memory_bytes": 512 * 2**20}]}  # a host pid, invisible
    gpu1 = {"gpu_index": 1, "uuid": "GPU-bbbb", "name": "NVIDIA A100-SXM4-40GB", "memory_used_bytes": 0,
            "memory_total_bytes": 40 * GIB, "processes": []}
    return [[gpu0, gpu1]]


def test_watch_lists_pid_user_gpu_memory_and_command_of_every_process(tmp_path):
    frames = write_frames(tmp_path / "frames.json", frames_with_processes(os.getpid()))
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}", COLUMNS="120")
    r = gpuwise("watch", "--count", "1", env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for header in ("PID", "USER", "GPU-MEM", "COMMAND"):
        assert header in out
    alice = next(line for line in out.splitlines() if "424242" in line)
    assert "alice" in alice and "11.0 GiB" in alice and "python train.py --lr 3e-4" in alice
    mine = next(line for line in out.splitlines() if f" {os.getpid()} " in line)
    assert getpass.getuser() in mine and "1.0 GiB" in mine and "pytest" in mine
    assert "not visible here" in next(line for line in out.splitlines() if "2000000000" in line)
    # largest first
    assert out.index("424242") < out.index(str(os.getpid())) < out.index("2000000000")


def test_watch_json_holds_the_processes(tmp_path):
    frames = write_frames(tmp_path / "frames.json", frames_with_processes(os.getpid()))
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}")
    snap = json.loads(gpuwise("watch", "--json", env=env).stdout)
    by_pid = {p["pid"]: p for p in snap["processes"]}
    assert by_pid[424242] == {"gpu_index": 0, "mig_index": None, "pid": 424242, "used_memory_bytes": 11 * GIB,
                              "user": "alice", "command": "python train.py --lr 3e-4"}
    assert by_pid[os.getpid()]["user"] == getpass.getuser()
    assert by_pid[2_000_000_000]["user"] is None and by_pid[2_000_000_000]["command"] is None


def test_replay_frames_without_process_rows_still_replay():
    backend = ReplayBackend([[{"gpu_index": 0, "memory_used_bytes": GIB}]])
    (sample,) = backend.sample()
    assert sample.memory_used_bytes == GIB and backend.processes() == []


def test_the_nvml_backend_lists_the_processes_nvml_reports():
    gpu = FakeGpu(procs=[(os.getpid(), 3 * GIB), (2_000_000_001, None)])
    backend = NvmlBackend(FakeNvml([gpu]))
    backend.sample()
    rows = backend.processes()
    assert [(r.gpu_index, r.pid, r.used_memory_bytes) for r in rows] == [(0, os.getpid(), 3 * GIB),
                                                                          (0, 2_000_000_001, None)]
    assert rows[0].user == getpass.getuser() and "pytest" in rows[0].command
    assert rows[1].user is None and rows[1].command is None
