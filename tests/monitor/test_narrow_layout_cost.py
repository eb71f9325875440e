"""Fitting watch's GPU table to a narrow terminal builds a handful of tables per frame, not one per layout: at
40-60 columns a frame of 48 devices tried up to ~35 layouts, each a whole table (363 ms a frame against 12 ms
at 100 columns). The layout chosen is still the widest that fits, as trying each in turn chose it."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpuwise.monitor import live
from gpuwise.monitor.sample import GpuSample
from gpuwise.table_fit import table_columns

GIB = 2**30


def _history(n_gpus: int = 16, n_mig: int = 4, samples: int = 20) -> dict:
    """``n_gpus`` A100s, every other one split into ``n_mig`` MIG instances: 48 devices by default."""
    history: dict = {}
    for g in range(n_gpus):
        keys = [(g, None)] + ([(g, m) for m in range(n_mig)] if g % 2 else [])
        for key in keys:
            mig = key[1] is not None
            history[key] = [GpuSample(t_s=float(k), gpu_index=g, mig_index=key[1],
                                      name="NVIDIA A100-SXM4-80GB MIG 1g.10gb" if mig else "NVIDIA A100-SXM4-80GB",
                                      utilization_pct=float((7 * k + g) % 100), memory_used_bytes=(k % 9 + 1) * GIB,
                                      memory_total_bytes=(10 if mig else 80) * GIB, power_w=150.0 + g,
                                      temperature_c=55.0, process_count=1)
                            for k in range(samples)]
    return history


def _text(renderable, columns: int) -> str:
    console = Console(width=columns, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def _first_fitting(history: dict, columns: int) -> str:
    """The oracle: each layout in turn, widest first, until one fits."""
    for spark, name_chars, compact in live._fits(history, 16):
        table = live._gpu_table(history, spark, None, name_chars=name_chars, compact=compact)
        if table_columns(table) <= columns:
            break
    return _text(table, columns)


@pytest.mark.parametrize("columns", [40, 50, 60])
def test_a_frame_of_48_devices_on_a_narrow_terminal_builds_a_handful_of_tables(monkeypatch, columns):
    history = _history()
    assert len(history) == 48
    built = []
    build = live._gpu_table
    monkeypatch.setattr(live, "_gpu_table", lambda *a, **k: built.append(1) or build(*a, **k))
    live.render_live(history, max_columns=columns)
    assert len(built) <= 8, len(built)      # before: 33 or 34 at these widths


@pytest.mark.parametrize("columns", range(20, 131, 3))
def test_the_layout_chosen_is_the_widest_that_fits(columns):
    history = _history(n_gpus=4, n_mig=3, samples=6)
    assert _text(live.render_live(history, max_columns=columns), columns) == _first_fitting(history, columns)
