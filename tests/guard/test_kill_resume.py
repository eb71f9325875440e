"""SIGKILL the example at random moments, >= 20 times, some of them in the middle of a save: every restart
resumes from a checkpoint that verifies, and the run ends with the parameters of an uninterrupted run."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time

import pytest

from gpuwise.guard import CheckpointStore, GuardError

from .helpers import EXAMPLE, PYTHON, example_env, steps_printed, wait_for

STEPS = 100
ARGS = ["--steps", str(STEPS), "--seed", "7", "--save-every", "2", "--hidden", "256", "--keep", "3"]
KILLS = 22


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(tmp_path, zygote):
    reference = subprocess.run([PYTHON, str(EXAMPLE), "--checkpoint-dir", str(tmp_path / "ref"), *ARGS],
                               capture_output=True, text=True, env=example_env(), timeout=300)
    assert reference.returncode == 0, reference.stderr
    expected = reference.stdout.strip().splitlines()[-1]
    assert expected.startswith("final_checksum=")

    ckpt_dir = tmp_path / "ckpt"
    store = CheckpointStore(ckpt_dir)
    rng = random.Random(20261202)  # fixed: the same kill plan every run of the test
    kills = kills_during_save = 0
    corrupted_step = None
    final = None
    for attempt in range(200):
        should_resume_at = _resumable_step(store)
        argv = ["--checkpoint-dir", str(ckpt_dir), *ARGS] + (["--async-save"] if attempt % 2 else [])
        out, err = tmp_path / f"run{attempt}.out", tmp_path / f"run{attempt}.err"
        pid = zygote.start(argv, out, err)
        if kills < KILLS or corrupted_step is None:   # and on, until a newest checkpoint was damaged
            # Random moments, measured in steps so that the plan does not depend on the machine's speed:
            # 1-4 steps after the resume, plus a random fraction of a step.
            target = should_resume_at + rng.randint(1, 4)
            wait_for(lambda: any(s >= target for s in steps_printed(out)), 60)
            if kills % 3 == 2:   # aim at a save: kill as soon as a temporary checkpoint directory appears
                wait_for(lambda: any(ckpt_dir.glob(".tmp-step-*")), 10, poll_s=0.001)
            else:
                time.sleep(rng.uniform(0.0, 0.02))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass   # it ended by itself (its status and log say how, below)
        status = zygote.wait()
        log = err.read_text()
        # Every resume loads exactly the newest checkpoint that verifies independently.
        resumed = re.search(r"resumed from step-(\d+)", log)
        if should_resume_at:
            assert resumed and int(resumed.group(1)) == should_resume_at, log
            printed = steps_printed(out)
            assert not printed or printed[0] == should_resume_at + 1
        if corrupted_step is not None and attempt == corrupted_attempt:
            assert f"skipped step-{corrupted_step:09d}" in log and "checksum" in log, log
        if status == -signal.SIGKILL:
            kills += 1
            kills_during_save += any(ckpt_dir.glob(".tmp-step-*"))
            # From the 10th kill on, once there is an older checkpoint to fall back to, damage the newest: the
            # next resume must skip it. Counted in checkpoints, not kills: on a loaded machine a save outlasts
            # the random moment after its step, and ten kills may leave a single checkpoint (damaging that one
            # is another test's refusal, not this skip).
            if kills >= 10 and corrupted_step is None:
                store.recover()  # (a complete save the kill left unrenamed would otherwise be the newest)
            if kills >= 10 and corrupted_step is None and len(store.step_dirs()) >= 2:
                newest = store.step_dirs()[0]
                data = bytearray((newest / "state.pt").read_bytes())
                data[len(data) // 3] ^= 0x55
                (newest / "state.pt").write_bytes(bytes(data))
                corrupted_step, corrupted_attempt = int(newest.name.split("-")[1]), attempt + 1
            continue
        assert status == 0, log
        final = out.read_text().strip().splitlines()[-1]
        break
    assert kills >= 20, f"only {kills} kills landed before the run finished"
    assert corrupted_step is not None and corrupted_attempt <= attempt, "no damaged checkpoint was skipped"
    assert kills_during_save >= 1, "no kill interrupted a save"
    assert final == expected


def _resumable_step(store: CheckpointStore) -> int:
    """The step a resume continues from: the newest verified checkpoint, or a newer complete save that a
    kill stopped before its rename (the resume puts it in place)."""
    newest = store.latest()[0]
    steps = [newest.step] if newest else []
    for leftover in [*store.directory.glob(".tmp-step-*"), *store.directory.glob(".old-step-*")]:
        try:
            steps.append(store.verify(leftover).step)
        except GuardError:
            pass
    return max(steps, default=0)
