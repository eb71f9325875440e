"""Idle time on several GPUs is GPU time: "8 idle stretch(es), 2.0 h in all" on a 2 h job on 8 GPUs summed the
GPUs' stretches and read as if the job had idled the whole run. The report says it as GPU time and per GPU
(text), and --json adds the totals (``idle_stretch_count``, ``idle_gpu_s``, ``idle_s_per_gpu``) beside each GPU's
stretches."""

from __future__ import annotations

import pytest

from gpuwise.report import build_report
from gpuwise.report import usage as usage_rules    # its MIN_IDLE_STRETCH_S
from gpuwise.units import format_duration

from tests.report.helpers import gpuwise_run_log, one_line, text_of

GIB = 2**30
STEP_S = 60.0
SAMPLES = 120                   # 2 h at one sample a minute
IDLE_SAMPLES = 15               # each GPU idles 15 samples running, then the next sample is busy: 15 min


def frames(gpus: int) -> list[list[dict]]:
    """``gpus`` H100s busy 90 %, each idle (0 %) for IDLE_SAMPLES samples, from a different time."""
    def busy(k: int, i: int) -> float:
        first = 5 + i * 12          # staggered: each stretch ends before the log does
        return 0.0 if first <= k < first + IDLE_SAMPLES else 90.0
    return [[dict(t_s=STEP_S * k, gpu_index=i, name="NVIDIA H100 80GB HBM3", utilization_pct=busy(k, i),
                  memory_used_bytes=30 * GIB, memory_total_bytes=80 * GIB) for i in range(gpus)]
            for k in range(SAMPLES)]


def busy_line(report) -> str:
    """The text from its Busy line on, on one line."""
    return one_line(text_of(report)).split("Busy ", 1)[1]


def test_idle_stretches_on_eight_gpus_are_said_as_gpu_time_and_per_gpu(tmp_path, catalog):
    report = build_report(gpuwise_run_log(tmp_path / "eight.db", frames(8)), catalog)
    per_gpu_s = IDLE_SAMPLES * STEP_S
    assert per_gpu_s >= usage_rules.MIN_IDLE_STRETCH_S
    line = busy_line(report)
    assert (f"8 idle stretch(es) on 8 GPUs, {format_duration(8 * per_gpu_s)} of GPU time in all "
            f"({format_duration(per_gpu_s)} per GPU on average), longest {format_duration(per_gpu_s)}") in line
    usage = report.to_dict()["usage"]
    assert usage["idle_stretch_count"] == 8
    assert usage["idle_gpu_s"] == pytest.approx(8 * per_gpu_s)
    assert usage["idle_s_per_gpu"] == pytest.approx(per_gpu_s)
    assert all(len(d["idle_stretches"]) == 1 for d in usage["devices"])     # each GPU's own, kept


def test_idle_stretches_on_one_gpu_are_said_as_its_time(tmp_path, catalog):
    report = build_report(gpuwise_run_log(tmp_path / "one.db", frames(1)), catalog)
    per_gpu_s = IDLE_SAMPLES * STEP_S
    assert f"1 idle stretch(es), {format_duration(per_gpu_s)} in all, longest" in busy_line(report)
    assert report.to_dict()["usage"]["idle_s_per_gpu"] == pytest.approx(per_gpu_s)
