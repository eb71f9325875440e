"""latest_verified_checkpoint names the checkpoints it skips through the guard's logger, not print: a program
that configured logging gets them there (once), one that did not still sees ``gpuwise.guard: …`` on stderr."""

from __future__ import annotations

import logging

from gpuwise.guard.integrations.hf import latest_verified_checkpoint


def _cut_short(tmp_path):
    (tmp_path / "checkpoint-6").mkdir()
    (tmp_path / "checkpoint-6" / "pytorch_model.bin").write_bytes(b"partial")   # no manifest: a kill mid-save
    return tmp_path


def test_skipped_checkpoints_go_to_the_guards_logger(tmp_path, caplog, capsys):
    out = _cut_short(tmp_path)
    with caplog.at_level(logging.WARNING, logger="gpuwise.guard"):
        assert latest_verified_checkpoint(out, allow_fresh=True) is None
    skipped = [r for r in caplog.records if "skipped checkpoint-6" in r.getMessage()]
    assert len(skipped) == 1 and skipped[0].name.startswith("gpuwise.guard")
    assert capsys.readouterr().err.count("skipped checkpoint-6") <= 1     # never printed besides the handler's


def test_without_logging_configured_they_still_reach_stderr_with_the_guard_prefix(tmp_path, capsys):
    configured = [logging.getLogger(name) for name in ("", "gpuwise")]   # the program's (or an earlier test's)
    saved = [logger.handlers[:] for logger in configured]
    for logger in configured:
        logger.handlers.clear()    # a training script that set up no logging
    try:
        latest_verified_checkpoint(_cut_short(tmp_path), allow_fresh=True)
    finally:
        for logger, handlers in zip(configured, saved):
            logger.handlers[:] = handlers
    assert "gpuwise.guard: skipped checkpoint-6" in capsys.readouterr().err
