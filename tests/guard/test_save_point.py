"""Where a checkpoint is written: after the caller's code for the step (an EMA update, ``extras``) ran, so a
resume continues with that state exactly as an uninterrupted run does, after a SIGKILL and after SIGTERM."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from gpuwise.guard import EXIT_RESTART, CheckpointStore

from .helpers import steps_printed

JOB = Path(__file__).with_name("guarded_job.py")


def _run(zygote, tmp_path, name: str, argv: list[str]) -> tuple[int, str, str]:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    zygote.start(argv, out, err, script=JOB)
    return zygote.wait(), out.read_text(), err.read_text()


def _final(stdout: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith("final ")]
    return line


def test_ema_and_extras_updated_after_step_resume_as_if_never_stopped(tmp_path, zygote):
    # the defect: the checkpoint was written inside step(), before the caller's EMA update for that step, so
    # every resume came back one EMA update (and one counter increment) short: n_averaged 19 instead of 20
    status, out, err = _run(zygote, tmp_path, "ref", [str(tmp_path / "ref"), "20"])
    assert status == 0, err
    expected = _final(out)
    assert "n_averaged=20 counter=20" in expected

    killed = str(tmp_path / "killed")
    status, _, err = _run(zygote, tmp_path, "killed1", [killed, "20", "--kill-at", "13"])
    assert status == -signal.SIGKILL, err
    assert CheckpointStore(killed).latest()[0].step == 10
    status, out, err = _run(zygote, tmp_path, "killed2", [killed, "20"])
    assert status == 0, err
    assert "resumed from step-000000010" in err
    assert _final(out) == expected


def test_sigterm_saves_after_the_callers_code_for_the_step_and_returns_its_loss(tmp_path, zygote):
    # the defect also lost the preempted step's loss and the caller's code for it: step() exited inside
    term = str(tmp_path / "term")
    status, out, err = _run(zygote, tmp_path, "term1", [term, "20", "--term-at", "7"])
    assert status == EXIT_RESTART, err
    assert steps_printed(Path(tmp_path / "term1.out"))[-1] == 7, "step 7 returned its loss to the caller"
    ckpt = CheckpointStore(term).latest()[0]
    assert ckpt.step == 7 and ckpt.manifest.meta["reason"] == "preempted"
    assert re.search(r"checkpointing step 7", err)

    status, out, err = _run(zygote, tmp_path, "term2", [term, "20"])
    assert status == 0, err
    status, ref, ref_err = _run(zygote, tmp_path, "ref", [str(tmp_path / "ref"), "20"])
    assert status == 0, ref_err
    assert _final(out) == _final(ref)
