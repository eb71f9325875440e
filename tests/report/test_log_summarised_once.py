"""A report summarises its log once: build_report's summary is the one the measurement and the comparison with
the prediction read (each summarised the log again: three times 1.1 s on a log of 400,000 samples)."""

from __future__ import annotations

import os
import sys

from gpuwise.catalog import load_catalog
from gpuwise.report import build_report
from gpuwise.report.usage import summarize

from tests.report.helpers import sampler_log

GIB = 2**30


def _run_log(path):
    me = os.getpid()
    frames = [[{"t_s": 100.0 + 10 * k, "gpu_index": 0, "name": "NVIDIA A100-SXM4-40GB", "utilization_pct": 50.0,
                "memory_used_bytes": 14 * GIB, "memory_total_bytes": 40 * GIB,
                "processes": [{"pid": me, "used_memory_bytes": (8 + k) * GIB}]}] for k in range(4)]
    return sampler_log(path, frames, watch_pid=me)


def test_a_run_log_is_summarised_once_per_report(tmp_path):
    log = _run_log(tmp_path / "r.db")
    catalog = load_catalog(user_file=False)
    calls = []

    def count(frame, event, _arg):
        if event == "call" and frame.f_code is summarize.__code__:
            calls.append(1)

    sys.setprofile(count)
    try:
        report = build_report(log, catalog)
    finally:
        sys.setprofile(None)
    assert report.usage.needed_peak_bytes == 11 * GIB
    assert len(calls) == 1, len(calls)      # before: 3
