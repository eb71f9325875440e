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


BOB = {"pid": 434343, "used_memory_bytes": 2 * GIB, "user": "bob", "command": "python serve.py"}


def frames_of_two_users() -> list[list[dict]]:
    gpu0 = {"gpu_index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 30,
            "memory_used_bytes": 13 * GIB, "memory_total_bytes": 40 * GIB, "processes": [ALICE]}
    gpu1 = {"gpu_index": 1, "uuid": "GPU-bbbb", "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 90,
            "memory_used_bytes": 2 * GIB, "memory_total_bytes": 40 * GIB, "processes": [BOB]}
    return [[gpu0, gpu1]]


def test_watch_narrows_to_a_user_a_gpu_or_a_process(tmp_path):
    """Was: no filters (nvitop has --user and --pid); every process of a shared box was listed."""
    frames = write_frames(tmp_path / "frames.json", frames_of_two_users())
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}", COLUMNS="120")
    by_user = gpuwise("watch", "--count", "1", "--user", "bob", env=env)
    assert by_user.returncode == 0, by_user.stderr
    assert "434343" in by_user.stdout and "424242" not in by_user.stdout
    assert "only user bob" in by_user.stdout
    snap = json.loads(gpuwise("watch", "--json", "--gpu", "0", env=env).stdout)
    assert [g["gpu_index"] for g in snap["gpus"]] == [0]
    assert [p["pid"] for p in snap["processes"]] == [424242]
    assert snap["filter"] == {"gpu_indices": [0], "users": [], "pids": []}
    snap = json.loads(gpuwise("watch", "--json", "--pid", "434343,424242", "--user", "alice", env=env).stdout)
    assert [p["pid"] for p in snap["processes"]] == [424242]
    assert len(snap["gpus"]) == 2                       # a process filter keeps every GPU's row


def test_watch_filters_refuse_bad_values_in_one_line(tmp_path):
    frames = write_frames(tmp_path / "frames.json", frames_of_two_users())
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}")
    for args, said in ((("--gpu", "first"),), "--gpu must be a whole number"), \
                      ((("--gpu", "7"),), "--gpu 7: no such GPU here (GPUs 0, 1)"), \
                      ((("--pid", "-3"),), "--pid must be a whole number"):
        for json_flag in ((), ("--json",)):
            r = gpuwise("watch", "--count", "1", *args[0], *json_flag, env=env)
            assert r.returncode == 2, (args, r.stderr)
            assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_a_pid_filter_keeps_the_children_of_the_pid():
    from gpuwise.monitor.procs import ProcessRow
    from gpuwise.monitor.watch_filter import WatchFilter

    rows = [ProcessRow(0, None, pid, GIB, "u", "c") for pid in (10, 11, 12, 20)]
    tree = {10: frozenset({10, 11, 12}), 20: frozenset({20})}.__getitem__
    kept = WatchFilter(pids=frozenset({10})).processes(rows, tree=tree)
    assert [r.pid for r in kept] == [10, 11, 12]
    assert WatchFilter().processes(None) is None
    # a real process tree: this test's own process is its own tree's root
    assert [r.pid for r in WatchFilter(pids=frozenset({os.getpid()})).processes(
        [ProcessRow(0, None, os.getpid(), GIB, "u", "c"), ProcessRow(0, None, 1, GIB, "root", "init")])] == [os.getpid()]


def test_a_filter_narrows_the_gpu_tables_process_counts_and_says_when_nothing_matches(tmp_path):
    """From a new-user trial: with --user bob the GPU table still counted alice's process on GPU 0, and
    --user carol said 'no compute processes on these GPUs' with two running; the prompt followed the table."""
    frames = write_frames(tmp_path / "frames.json", frames_of_two_users())
    env = dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{frames}", COLUMNS="80")
    out = gpuwise("watch", "--count", "1", "--user", "bob", env=env).stdout
    procs = {line.split()[0]: line.split()[-1] for line in out.splitlines() if "A100-SXM4-40GB" in line}
    assert procs == {"0": "0", "1": "1"}
    nobody = gpuwise("watch", "--count", "1", "--user", "carol", env=env).stdout
    assert "no process matches (user carol); 2 other(s) on these GPUs" in nobody
    assert "no compute processes" not in nobody
    assert out.endswith("\n")
    title = next(line for line in gpuwise("watch", "--count", "1", "--gpu", "0,1", "--user", "alice",
                                           env=env).stdout.splitlines() if line.startswith("gpuwise watch"))
    assert title.endswith("only GPU 0, 1; user alice")       # one line, not wrapped at the table's width
