"""What a person sees: the guard's lines carry the documented ``gpuwise.guard:`` prefix where the script
configured no logging, and go (once) through the script's own logging where it did."""

from __future__ import annotations

from pathlib import Path

JOB = Path(__file__).with_name("guarded_job.py")


def _stderr_of(zygote, tmp_path, *args: str) -> list[str]:
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    zygote.start([str(tmp_path / "ckpt"), "5", *args], out, err, script=JOB)
    assert zygote.wait() == 0, err.read_text()
    return err.read_text().splitlines()


def test_without_logging_configured_each_line_starts_with_gpuwise_guard(tmp_path, zygote):
    # the defect: Python's last-resort handler printed the bare message, not the documented prefix
    lines = _stderr_of(zygote, tmp_path)
    assert lines == [f"gpuwise.guard: no checkpoint in {tmp_path / 'ckpt'}: starting from step 0",
                     lines[1]], lines
    assert lines[1].startswith("gpuwise.guard: step-000000005 (periodic, ")


def test_with_logging_configured_the_scripts_format_shows_each_line_once(tmp_path, zygote):
    lines = _stderr_of(zygote, tmp_path, "--log-config")
    assert len(lines) == 2, lines
    assert lines[0] == f"LOG WARNING gpuwise.guard.guard: no checkpoint in {tmp_path / 'ckpt'}: starting from step 0"
    assert lines[1].startswith("LOG WARNING gpuwise.guard.guard: step-000000005 (periodic, ")
