"""``python -m gpuwise.guard.devices COUNT --min-free-gib G`` refuses a G that is no amount of memory in one line.

Before, ``--min-free-gib nan`` (or ``inf``) ended in a ``ValueError``/``OverflowError`` traceback with exit 1,
and ``-3`` was taken as "no minimum"; ``select_gpus(min_free_bytes=float("nan"))`` qualified no GPU and said
``>= nan GiB``.
"""

from __future__ import annotations

import pytest

from gpuwise.guard import GuardError
from gpuwise.guard.devices import FakeGpuSource, GpuState, main, select_gpus


def _box() -> FakeGpuSource:
    return FakeGpuSource([GpuState(0, "GPU-aaa", "NVIDIA A100", 30 * 2**30, 40 * 2**30, 10.0)])


@pytest.mark.parametrize("value", ["nan", "inf", "-3"])
def test_min_free_gib_that_is_no_amount_is_one_line_and_exit_2(capsys, monkeypatch, value: str) -> None:
    for name in ("CUDA_VISIBLE_DEVICES", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert main(["1", "--min-free-gib", value], source=_box()) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"gpuwise.guard: error: --min-free-gib must be a finite number of GiB >= 0, "
                            f"got {float(value)!r}\n")


def test_select_gpus_refuses_a_min_free_bytes_that_is_not_a_number() -> None:
    with pytest.raises(GuardError, match=r"^min_free_bytes must be a number >= 0, got nan$"):
        select_gpus(1, min_free_bytes=float("nan"), source=_box(), env={})
