"""The directory lock's verdict reaches every rank of a job, in one GuardError line, with real processes:

- a Guard created under torchrun before ``init_process_group`` (``WORLD_SIZE`` > 1 in the environment, no process
  group) was rank 0 on every rank: rank 1 was refused as "in use by another run" (rank 0's pid), and rank 0 then
  waited in ``init_process_group`` for ever;
- an OSError locking on rank 0 (ENOSPC writing the lock file) was raised before the verdict's broadcast, leaving
  the other ranks waiting in it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from .helpers import example_env

JOB = textwrap.dedent("""
    import datetime, errno, os, sys, torch
    import torch.distributed as dist
    from gpuwise.guard import Guard, GuardError
    directory, init, fail_on_rank0 = sys.argv[1], sys.argv[2], sys.argv[3] == "1"

    def rank(r):
        os.environ.update(RANK=str(r), LOCAL_RANK=str(r))
        if init != "-":
            dist.init_process_group("gloo", init_method=f"file://{init}", rank=r, world_size=2,
                                    timeout=datetime.timedelta(seconds=60))
        if fail_on_rank0 and r == 0:
            def no_space(fd, length):
                raise OSError(errno.ENOSPC, "No space left on device")
            os.ftruncate = no_space   # the lock file's owner text cannot be written
        model = torch.nn.Linear(4, 1)
        try:
            Guard(directory, model, verbose=False)   # no optimizer: its first use imports torch._dynamo (seconds)
            return "ok"
        except Exception as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "-"
            return f"{type(exc).__name__} {cause} {exc}"

    # one torch import, two real rank processes (forked, as torchrun's would be spawned)
    children = []
    for r in range(2):
        pid = os.fork()
        if pid == 0:
            line = rank(r)
            # one write per line: under PYTHONUNBUFFERED print's text and newline are two writes, and the two
            # ranks' lines could interleave ("...device1 GuardError ...")
            os.write(1, f"{r} {line}\\n".encode())
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
""")


def _free_port() -> int:
    """A port no other test holds (tests may run in parallel workers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ranks(directory: Path, init: str, fail_on_rank0: bool) -> list[str]:
    """Two ranks of one job (torchrun's environment), each saying how its Guard ended (rank 0's line first)."""
    env = {**example_env(), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port())}
    proc = subprocess.Popen([sys.executable, "-c", JOB, str(directory), init, "1" if fail_on_rank0 else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)   # past the ranks' 60 s gloo timeout: a hang is said by them
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("a rank hung") from None
    said = sorted(line for line in out.splitlines() if line[:2] in ("0 ", "1 "))
    assert len(said) == 2, err[-2000:]
    return [line[2:] for line in said]


def test_a_guard_before_init_process_group_is_refused_on_every_rank(tmp_path: Path) -> None:
    said = _ranks(tmp_path / "ck", "-", fail_on_rank0=False)
    expected = ("GuardError - create the Guard after torch.distributed.init_process_group (WORLD_SIZE=2 in the "
                "environment, no process group)")
    assert said == [expected, expected]
    assert not (tmp_path / "ck").exists()   # refused before anything was created


def test_a_failure_locking_on_rank_0_is_raised_on_every_rank(tmp_path: Path) -> None:
    said = _ranks(tmp_path / "ck", str(tmp_path / "init"), fail_on_rank0=True)
    expected = (f"checkpoint directory {tmp_path / 'ck'} could not be locked: OSError: [Errno 28] No space left on "
                "device")
    assert said == [f"GuardError OSError {expected}", f"GuardError - {expected}"]
