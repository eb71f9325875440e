"""What a third trial of `gpuwise report` found: a `gpuwise run` log of a job on 6 of 8 rented GPUs (NVML listing
the job's processes) neither said nor priced the 2 GPUs that idled beside it, as a log without process memory
does; and the HTML timeline's legend grew with the GPU count, covering both plots and stretching the image (an
8-GPU log drew over its plots, 64 GPUs made it four times as tall). The logs are written row by row with explicit
timestamps, as `gpuwise run` writes them."""

from __future__ import annotations

import base64
import re
import struct

import matplotlib.axes
import pytest

from gpuwise.report import build_report
from gpuwise.report.html import render_html
from gpuwise.runlog import VISIBLE_DEVICES_KEY, RunLog, visible_devices_meta

from tests.report.helpers import one_line, text_of

GIB = 2**30
A100 = "NVIDIA A100-SXM4-80GB"
T0_S = 1_700_000_000.0
INTERVAL_S = 10.0
SAMPLES = 60           # 10 min at 10 s: long enough to judge


def job_gpu(t_s: float, index: int) -> dict:
    """A GPU the job ran on: its process holds 40 GiB, 70 % busy."""
    return {"t_s": t_s, "gpu_index": index, "uuid": f"GPU-{index}", "name": A100, "utilization_pct": 70.0,
            "memory_used_bytes": 41 * GIB, "memory_total_bytes": 80 * GIB, "power_w": 300.0,
            "process_memory_bytes": 40 * GIB, "process_count": 1, "process_match": "pid"}


def idle_gpu(t_s: float, index: int) -> dict:
    """A GPU nothing ran on: no process, 0 % busy, a few MiB used."""
    return {"t_s": t_s, "gpu_index": index, "uuid": f"GPU-{index}", "name": A100, "utilization_pct": 0.0,
            "memory_used_bytes": 4 * 2**20, "memory_total_bytes": 80 * GIB, "power_w": 60.0,
            "process_memory_bytes": 0, "process_count": 0, "process_match": "pid"}


def other_job_gpu(t_s: float, index: int) -> dict:
    """A GPU another user's job ran on: NVML lists its process, none of ours."""
    return {**idle_gpu(t_s, index), "utilization_pct": 90.0, "memory_used_bytes": 30 * GIB, "process_count": 1}


UNSET = None              # CUDA_VISIBLE_DEVICES unset: the job could see every GPU
NOT_RECORDED = object()   # a log written before `gpuwise run` recorded what the job could see


def run_log(path, kinds, visible: str | None | object = UNSET) -> str:
    """A finished `gpuwise run` log: one GPU per entry of ``kinds`` (a row maker), SAMPLES samples each; the job given
    CUDA_VISIBLE_DEVICES=``visible`` (UNSET: every GPU; NOT_RECORDED: a log that does not say)."""
    with RunLog(path) as log:
        log.set_meta("command", ["python", "train.py"])
        if visible is not NOT_RECORDED:
            log.set_meta(VISIBLE_DEVICES_KEY, visible_devices_meta(visible))
        log.set_meta("start_t_s", T0_S)
        log.write_gpu_samples([kind(T0_S + k * INTERVAL_S, i) for k in range(SAMPLES) for i, kind in enumerate(kinds)])
        log.set_meta("end_t_s", T0_S + (SAMPLES - 1) * INTERVAL_S)
        log.set_meta("exit_code", 0)
    return str(path)


# 1. GPUs idle beside a job whose processes NVML lists ------------------------------------------------------------------

def test_gpus_idle_beside_a_run_logs_job_are_said_and_priced(tmp_path, catalog):
    report = build_report(run_log(tmp_path / "run.db", [job_gpu] * 6 + [idle_gpu] * 2), catalog,
                          gpu_price=(10.0, "CNY"))
    assert report.usage.idle_labels == ("6", "7")
    assert report.right_sizing.gpu_count == 6
    assert report.right_sizing.idle_gpus_cost_per_hour == pytest.approx(2 * 10.0)
    text = one_line(text_of(report))
    assert "6 (of 8; 2 idle) × NVIDIA A100" in text.split("Memory")[0]
    assert "2 of the 8 GPUs in the log were idle the whole run (GPUs 6-7" in text
    assert "Rented: 8 × NVIDIA A100" in text and "¥80.00/h for 8 GPUs" in text


def test_a_gpu_another_job_ran_on_is_neither_the_jobs_nor_idle(tmp_path, catalog):
    report = build_report(run_log(tmp_path / "run.db", [job_gpu, job_gpu, other_job_gpu, idle_gpu]), catalog,
                          gpu_price=(10.0, "CNY"))
    assert report.usage.job_labels == ("0", "1")
    assert report.usage.idle_labels == ("3",)
    assert report.right_sizing.gpu_count == 2


# 2. the timeline's legend, whatever the GPU count ----------------------------------------------------------------------

def timeline_png_size_px(html_text: str) -> tuple[int, int]:
    """(width, height) in pixels of the HTML's first image, the timeline (a PNG's IHDR)."""
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', html_text).group(1))
    return struct.unpack(">II", png[16:24])


@pytest.fixture
def legend_labels(monkeypatch):
    """The labels of every legend drawn, as matplotlib shows them."""
    shown: list[str] = []
    legend = matplotlib.axes.Axes.legend

    def recording_legend(self, *args, **kwargs):
        made = legend(self, *args, **kwargs)
        shown.extend(t.get_text() for t in made.get_texts())
        return made

    monkeypatch.setattr(matplotlib.axes.Axes, "legend", recording_legend)
    return shown


@pytest.mark.parametrize("gpus", [8, 32])
def test_the_timeline_keeps_its_size_however_many_gpus_the_job_used(tmp_path, catalog, gpus):
    one = render_html(build_report(run_log(tmp_path / "one.db", [job_gpu]), catalog))
    many = render_html(build_report(run_log(tmp_path / "many.db", [job_gpu] * gpus), catalog))
    assert timeline_png_size_px(many) == timeline_png_size_px(one)


def test_many_gpus_share_one_legend_entry_per_line_kind(tmp_path, catalog, legend_labels):
    render_html(build_report(run_log(tmp_path / "many.db", [job_gpu] * 32), catalog))
    gpu_entries = [s for s in legend_labels if s.startswith("GPU")]
    assert gpu_entries == ["GPUs 0-31 memory used", "GPUs 0-31 job's processes"]


# 3. readings missing every other sample ---------------------------------------------------------------------------------

def every_other_utilization_missing(t_s: float, index: int) -> dict:
    """``job_gpu`` whose utilisation NVML reports only on even samples ([N/A] between)."""
    sample = job_gpu(t_s, index)
    return sample if round((t_s - T0_S) / INTERVAL_S) % 2 == 0 else {**sample, "utilization_pct": None}


def test_a_line_whose_readings_stand_alone_is_drawn_as_dots(tmp_path, catalog, monkeypatch):
    drawn: dict[str, dict] = {}
    plot = matplotlib.axes.Axes.plot

    def recording_plot(self, *args, **kwargs):
        drawn[kwargs.get("label", "")] = kwargs
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", recording_plot)
    render_html(build_report(run_log(tmp_path / "na.db", [every_other_utilization_missing]), catalog))
    assert drawn["GPU 0"].get("marker")                    # the busy share: each reading between two [N/A]
    assert not drawn["GPU 0 memory used"].get("marker")    # an unbroken line needs none
