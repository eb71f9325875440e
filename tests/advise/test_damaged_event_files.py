"""A TensorBoard event file damaged mid-file: the events before the damage are used, and it is said in one
warning naming the file (tensorboard's loader stops there silently)."""

from __future__ import annotations

import logging

from gpuwise.advise.readers import read_log


def _event_file(run, steps: int):
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(log_dir=str(run)) as writer:
        for step in range(steps):
            writer.add_scalar("loss", 3.0 / (1 + step), step)
    (path,) = run.glob("*tfevents*")
    return path


def test_an_event_file_damaged_mid_file_is_read_to_the_damage_with_a_warning(tmp_path, caplog):
    path = _event_file(tmp_path / "run", 200)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        curve = read_log(tmp_path / "run").curve
    assert 10 < len(curve) < 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and path.name in warnings[0] and "damaged" in warnings[0]


def test_an_intact_event_file_gives_no_warning(tmp_path, caplog):
    _event_file(tmp_path / "run", 50)
    with caplog.at_level(logging.WARNING, logger="gpuwise"):
        assert len(read_log(tmp_path / "run").curve) == 50
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
