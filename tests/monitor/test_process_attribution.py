"""Which GPU memory is the job's: pid matching, and the container case where NVML's pids are the host's."""

from __future__ import annotations

import os
import subprocess
import sys

from gpuwise.monitor.procs import GpuProcess, attribute_memory, process_tree

GIB = 2**30
HOST_PIDS = [GpuProcess(4_000_001, 6 * GIB), GpuProcess(4_000_002, 2 * GIB)]  # not live processes here


def test_watched_pids_that_nvml_lists_count_alone():
    me = os.getpid()
    procs = [GpuProcess(me, 3 * GIB), GpuProcess(1, 9 * GIB)]
    assert attribute_memory(procs, {me}) == (3 * GIB, "pid")


def test_in_a_container_host_pids_match_nothing_so_every_process_counts():
    assert attribute_memory(HOST_PIDS, {os.getpid()}) == (8 * GIB, "all")


def test_an_empty_process_list_means_unknown_not_zero():
    assert attribute_memory([], {os.getpid()}) == (None, None)


def test_live_local_processes_that_are_not_ours_give_zero():
    assert attribute_memory([GpuProcess(1, 5 * GIB)], {os.getpid()}) == (0, "pid")


def test_without_watched_pids_every_process_counts():
    assert attribute_memory(HOST_PIDS, None) == (8 * GIB, "all")


def test_unknown_per_process_memory_stays_unknown():
    assert attribute_memory([GpuProcess(os.getpid(), None)], {os.getpid()}) == (None, "pid")


def test_process_tree_finds_grandchildren():
    code = "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); print(p.pid, flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        tree = process_tree(child.pid)
        assert {child.pid, grandchild} <= tree and os.getpid() not in tree
    finally:
        subprocess.run(["pkill", "-P", str(child.pid)], check=False)
        child.kill()
        child.wait()
