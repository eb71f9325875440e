"""Under torchrun (2 gloo ranks), a preempted Guard run exits 75 through ``python -m gpuwise.guard.torchrun``,
whether the signal reached the workers or the launcher; torchrun itself turns the workers' 75 into 1."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from gpuwise.errors import EXIT_RESTART
from gpuwise.guard import CheckpointStore
from gpuwise.guard.torchrun import workers_checkpointed

from .helpers import EXAMPLE, PYTHON, example_env, steps_printed, wait_for

ARGS = ["--steps", "200", "--seed", "3", "--save-every", "1000", "--batch-size", "16", "--samples", "96",
        "--hidden", "32", "--step-sleep-s", "0.05"]


def _workers(launcher_pid: int) -> list[int]:
    children = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
    return [int(pid) for pid in children]


def _preempt(launcher: list[str], tmp_path: Path, name: str, *, signal_launcher: bool = False
             ) -> tuple[int, Path, str]:
    """SIGTERM to the workers (the platform's signal reaching them), or to the launcher (``docker stop``)."""
    ckpt_dir, out = tmp_path / name, tmp_path / f"{name}.out"
    with open(out, "w") as stdout:
        proc = subprocess.Popen([*launcher, "--standalone", "--nproc-per-node", "2", "--max-restarts", "0",
                                 str(EXAMPLE), "--checkpoint-dir", str(ckpt_dir), *ARGS],
                                stdout=stdout, stderr=subprocess.PIPE, text=True, env=example_env())
        try:
            assert wait_for(lambda: len(steps_printed(out)) >= 3, 240, poll_s=0.1), proc.stderr
            for pid in [proc.pid] if signal_launcher else _workers(proc.pid):
                os.kill(pid, signal.SIGTERM)
            _, err = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
    return proc.returncode, ckpt_dir, err


@pytest.mark.slow
def test_a_preempted_torchrun_job_exits_with_the_restart_code(tmp_path):
    code, ckpt_dir, err = _preempt([PYTHON, "-m", "gpuwise.guard.torchrun"], tmp_path, "wrapped")
    assert code == EXIT_RESTART, err[-3000:]
    ckpt, _ = CheckpointStore(ckpt_dir).latest()
    assert ckpt is not None and ckpt.manifest.meta["reason"] == "preempted" and ckpt.manifest.world_size == 2
    plain, _, _ = _preempt([PYTHON, "-m", "torch.distributed.run"], tmp_path, "plain")
    assert plain == 1  # what the wrapper exists for


@pytest.mark.slow
def test_a_signal_to_the_launcher_exits_with_the_restart_code_and_one_line(tmp_path):
    # the defect: torchrun forwarded the SIGTERM, the workers checkpointed and exited 75, and the wrapper
    # exited 1 with a traceback (torchrun's SignalException)
    code, ckpt_dir, err = _preempt([PYTHON, "-m", "gpuwise.guard.torchrun"], tmp_path, "launcher",
                                   signal_launcher=True)
    assert code == EXIT_RESTART, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.splitlines()[-1] == ("gpuwise.guard: torchrun got SIGTERM, passed it to the workers, and they exited "
                                    "75 (checkpointed and stopped): exiting 75, restart to resume")
    ckpt, _ = CheckpointStore(ckpt_dir).latest()
    assert ckpt is not None and ckpt.manifest.meta["reason"] == "preempted" and ckpt.manifest.world_size == 2


def test_the_workers_count_as_checkpointed_only_when_each_exited_75_or_of_sigterm():
    assert workers_checkpointed([75, 75]) and workers_checkpointed([75, -signal.SIGTERM], first_code=75)
    assert not workers_checkpointed([-signal.SIGTERM, -signal.SIGTERM])  # nobody checkpointed
    assert not workers_checkpointed([75, -signal.SIGKILL])                 # cut off past the shutdown timeout
    assert not workers_checkpointed([75, 1]) and not workers_checkpointed([75, 0])
    assert not workers_checkpointed([75, -signal.SIGTERM], first_code=-signal.SIGTERM)
