"""DDP on CPU (gloo, 2 processes under torchrun): checkpoint, kill a worker, elastic restart, resume; an
out-of-memory on one rank only, which both ranks agree on (no hung collective) and retry from the same random
state; a failed save warned about once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuwise.guard import CheckpointStore
from gpuwise.runlog import read_events, read_train_metrics

from .helpers import EXAMPLE, PYTHON, example_env

ARGS = ["--steps", "12", "--seed", "3", "--save-every", "3", "--batch-size", "16", "--samples", "96",
        "--hidden", "64", "--inject-oom-above", "8", "--inject-oom-rank", "1"]


def _torchrun(ckpt_dir, *extra: str, max_restarts: int = 0) -> subprocess.Popen:
    cmd = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--max-restarts", str(max_restarts), str(EXAMPLE), "--checkpoint-dir", str(ckpt_dir), *ARGS, *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=example_env())


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
def test_ddp_worker_killed_mid_run_resumes_to_the_same_parameters(tmp_path):
    # Rank 1 SIGKILLs itself before step 8, which ends the torchrun job; a new torchrun job resumes from the
    # checkpoint of step 6 and must end exactly where the uninterrupted run ended. (The restart is a new job,
    # as a supervisor or a re-rented machine would start it: torchrun's in-place --max-restarts path hung now
    # and then in gloo's connection set-up of the new generation on this 2-core machine, torch 2.14.)
    run_log = tmp_path / "run.db"
    reference = _finish(_torchrun(tmp_path / "ref"))
    assert reference.returncode == 0, reference.stderr[-3000:]
    expected = reference.stdout.strip().splitlines()[-1]
    assert expected.startswith("final_checksum=")

    died = _finish(_torchrun(tmp_path / "ckpt", "--die-at-step", "8", "--run-log", str(run_log)))
    assert died.returncode != 0
    killed = _finish(_torchrun(tmp_path / "ckpt", "--run-log", str(run_log)))
    assert killed.returncode == 0, killed.stderr[-3000:]
    assert "resumed from step-000000006" in killed.stderr
    assert killed.stdout.strip().splitlines()[-1] == expected

    ckpt, skipped = CheckpointStore(tmp_path / "ckpt").latest()
    assert ckpt.step == 12 and not skipped and ckpt.manifest.world_size == 2
    # Rank 1 alone ran out of memory above 8 samples; rank 0 (which writes the log) took micro-batches of 8 too.
    assert {v for _, _, v in read_train_metrics(run_log)["micro_batch_size"]} == {8.0}
    assert any(e["kind"] == "oom_recovered" for e in read_events(run_log))


@pytest.mark.slow
def test_an_oom_on_one_rank_is_reported_with_that_rank(tmp_path):
    # the defect: rank 0 wrote "on this rank" when rank 1 ran out in a micro-batch before the last (the
    # flag it read had become the all-ranks value)
    run_log = tmp_path / "run.db"
    cmd = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(EXAMPLE),
           "--checkpoint-dir", str(tmp_path / "ckpt"), "--steps", "2", "--seed", "3", "--save-every", "100",
           "--batch-size", "16", "--samples", "64", "--hidden", "16", "--micro-batch-size", "8",
           "--inject-oom-above", "4", "--inject-oom-rank", "1", "--run-log", str(run_log)]
    done = _finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=example_env()))
    assert done.returncode == 0, done.stderr[-3000:]
    (event,) = [e["message"] for e in read_events(run_log) if e["kind"] == "oom_recovered"]
    assert event == ("step 1: out of memory with micro-batch 8 on rank 1 (of 2); retrying the same batch of 16 "
                     "as micro-batches of 4")
    assert "gpuwise.guard: " + event in done.stderr


@pytest.fixture(scope="module")
def ddp_job(tmp_path_factory) -> subprocess.CompletedProcess:
    """One torchrun job of ``ddp_job.py`` (2 gloo ranks): an OOM on rank 1 only, then saves that fail."""
    work = tmp_path_factory.mktemp("ddp_job")
    cmd = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(Path(__file__).with_name("ddp_job.py")), str(work)]
    done = _finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=example_env()))
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_an_oom_on_one_rank_retries_every_rank_from_the_random_state_the_step_started_with(ddp_job):
    # the defect: rank 1's OOM (after its forward) ended rank 0's attempt too, and both retried drawing on
    # from where the failed attempts' dropout had left their generators
    for rank in (0, 1):
        assert f"rank={rank} oom_retry_params_equal=True oom_retry_next_random_equal=True" in ddp_job.stdout, \
            ddp_job.stdout


@pytest.mark.slow
def test_a_failed_save_under_torchrun_is_warned_once_not_once_per_rank(ddp_job):
    for step in (1, 2):
        lines = [line for line in ddp_job.stderr.splitlines()
                 if f"UserWarning: checkpoint of step {step} not written" in line]
        assert len(lines) == 1, ddp_job.stderr[-3000:]
        assert "ddp_job.py:" in lines[0]  # the user's line, as in a single process
