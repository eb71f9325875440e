"""Small real training pieces shared by the guard tests (tiny: the machine is shared)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_guarded.py"
PYTHON = sys.executable


def tiny_model(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 3))


def indexed_dataset(n: int = 48, seed: int = 0) -> TensorDataset:
    """(x, y, index): the index lets a test see exactly which samples a step used."""
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g), torch.arange(n))


def example_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def wait_for(predicate, timeout_s: float, poll_s: float = 0.002) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return False


def steps_printed(path: Path) -> list[int]:
    """The ``step=N`` lines the example printed so far."""
    return [int(m) for m in re.findall(r"^step=(\d+) ", path.read_text(), flags=re.M)] if path.exists() else []


class Zygote:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([PYTHON, str(Path(__file__).with_name("zygote.py"))], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=example_env())

    def start(self, argv: list[str], out: Path, err: Path, script: Path = EXAMPLE) -> int:
        """Run ``script`` (the example) with ``argv`` in a forked child; returns its pid."""
        req = {"script": str(script), "argv": argv, "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["pid"]

    def wait(self) -> int:
        return json.loads(self.proc.stdout.readline())["status"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# The end of a rank job's script (``run_rank_job``) that defines ``rank(r)``: two ranks forked, each printing one JSON
# line, ``{"rank": r, …}`` of what ``rank`` returned or ``{"rank": r, "error": …}`` (read back by ``rank_reports``).
TWO_RANKS_FORKED = textwrap.dedent("""
    children = []
    for r in range(2):
        pid = os.fork()
        if pid == 0:
            try:
                said = rank(r)
            except Exception as exc:
                said = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(1, (json.dumps({"rank": r, **said}) + "\\n").encode())
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
""")


def run_rank_job(job: str, *args: object, timeout_s: float = 400.0) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of ``python -c job args…``: a script that forks its gloo ranks, in a session of
    its own, killed whole (AssertionError "a rank hung") past ``timeout_s``, generous for a loaded machine."""
    proc = subprocess.Popen([sys.executable, "-c", job, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=example_env(), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("a rank hung") from None
    return out, err, proc.returncode


def rank_reports(out: str) -> list[dict]:
    """The JSON line each rank printed (``{"rank": r, …}``), by rank."""
    return sorted((json.loads(line) for line in out.splitlines() if line.startswith("{")), key=lambda d: d["rank"])
