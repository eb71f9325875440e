"""Each command in one process (a notebook, the tests) is as wide as the terminal is when it runs: rich read
COLUMNS once, when the console was made, so a command after one at 80 columns wrapped at 80 whatever COLUMNS
said (a by-class line at COLUMNS=200 split in three under pytest-xdist)."""

from __future__ import annotations

L7 = ["estimate", "hf:meta-llama/Llama-2-7b-hf", "--gpu", "h100-sxm", "--finetune", "full", "--num-gpus", "8",
      "--sharding", "zero3", "--batch-size", "4", "--seq-len", "2048"]


def _by_class_line(out: str) -> str:
    return next(line for line in out.splitlines() if "by operator class:" in line)


def test_a_command_after_a_narrower_one_uses_the_width_of_now(cli_run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, narrow, err = cli_run(*L7)
    assert code == 0, err
    assert "communication" not in _by_class_line(narrow)          # wrapped at 80
    monkeypatch.setenv("COLUMNS", "200")
    code, wide, err = cli_run(*L7)
    assert code == 0, err
    line = _by_class_line(wide)
    assert "communication (exposed)" in line and len(line) > 120
