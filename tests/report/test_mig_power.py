"""Power under MIG: NVML measures it per physical GPU, not per MIG instance (the monitor records each instance with
its GPU's power). The HTML's power line was empty for a job on two MIG profiles of one GPU (", 0.00 kWh"), while
the text gave the GPU's power as if it were the job's, and the two worded other power lines differently too (their
own rules). Text, HTML and JSON now say it is the whole GPU's, shared by its instances, from one rule
(``PowerSummary.words``)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from gpuwise.report import build_report
from gpuwise.report.html import render_html
from gpuwise.report import usage as usage_rules   # its MIG_POWER_BASIS

from tests.report.helpers import gpuwise_run_log, text_of

MIG_H100 = Path(__file__).parent.parent / "fixtures" / "replay_mig_a100_h100.json"   # GPU 0: A100, 2 MIG profiles


def stamped(frames: list[list[dict]]) -> list[list[dict]]:
    """``frames`` one second apart, twice over (16 samples: long enough to judge)."""
    return [[{**s, "t_s": float(k)} for s in frame] for k, frame in enumerate(frames * 2)]


def report_of(path: Path, catalog, frames: list[list[dict]], gpu_index: int | None = None):
    """The report of a `gpuwise run` log of ``frames`` (only GPU ``gpu_index``'s devices, when given)."""
    kept = frames if gpu_index is None else [[s for s in frame if s["gpu_index"] == gpu_index] for frame in frames]
    return build_report(gpuwise_run_log(path, kept), catalog)


def power_line(report) -> str:
    """The power line's words, which the text and the HTML must say alike."""
    text = next(line for line in text_of(report, 400).splitlines() if line.startswith("Power"))
    cell = re.search(r"<tr><th>Power</th><td>(.*?)</td></tr>", render_html(report))
    in_text, in_html = text.removeprefix("Power").strip(), html.unescape(cell.group(1)) if cell else ""
    assert in_html == in_text, "the HTML and the text say power differently"
    return in_text


def watts_of(frames: list[list[dict]], key: tuple[int, int | None]) -> list[float]:
    """The power readings of the device ``key`` (GPU index, MIG index) in ``frames``."""
    return [s["power_w"] for frame in frames for s in frame if (s["gpu_index"], s.get("mig_index")) == key]


@pytest.fixture(scope="module")
def frames() -> list[list[dict]]:
    return stamped(json.loads(MIG_H100.read_text())["frames"])


def test_two_mig_profiles_of_one_gpu_say_the_whole_gpus_power_alike_in_text_html_and_json(tmp_path, catalog,
                                                                                        frames):
    # the defect: HTML "Power , 0.00 kWh"; text "mean 214 W, peak 217 W" as if the instances' own
    report = report_of(tmp_path / "mig.db", catalog, frames, gpu_index=0)
    assert report.usage.mixed_gpus and report.usage.job_labels == ("0/mig0", "0/mig1")
    p = report.usage.power
    said = power_line(report)
    assert said == p.words(mixed=True)
    assert said.startswith(f"mean {p.mean_per_gpu_w:.0f} W, peak {p.peak_per_gpu_w:.0f} W, {p.energy_kwh:.2f} kWh")
    assert f"the whole of GPU 0, shared by its MIG instances: {usage_rules.MIG_POWER_BASIS}" in said
    d = report.to_dict()
    assert d["device_count"] == 2 and d["gpu_count"] == 1   # two MIG instances of one GPU...
    assert d["usage"]["power"]["gpu_count"] == 1 and d["usage"]["power"]["mig_gpu_labels"] == ["0"]   # ...one GPU
    a100_w = watts_of(frames, (0, 0))
    assert d["usage"]["power"]["mean_total_w"] == pytest.approx(sum(a100_w) / len(a100_w))


def test_mig_instances_beside_a_whole_gpu_name_the_gpu_they_share(tmp_path, catalog, frames):
    # the HTML said "2 GPUs together: mean …" without the peak the text gave, and neither said which was shared
    report = report_of(tmp_path / "mig_h100.db", catalog, frames)
    p = report.usage.power
    said = power_line(report)
    assert said == p.words(mixed=True)
    assert said.startswith(f"2 GPUs together: mean {p.mean_total_w:.0f} W, peak of one {p.peak_per_gpu_w:.0f} W")
    assert "(the whole of GPU 0, shared by its MIG instances" in said
    assert report.to_dict()["usage"]["power"]["mig_gpu_labels"] == ["0"]


def test_one_whole_gpus_power_is_said_alike_and_says_nothing_of_mig(tmp_path, catalog, frames):
    # the HTML said "per GPU: mean …" of one GPU, the text "mean …"
    report = report_of(tmp_path / "h100.db", catalog, frames, gpu_index=1)
    watts = watts_of(frames, (1, None))
    assert power_line(report) == (f"mean {sum(watts) / len(watts):.0f} W, peak {max(watts):.0f} W, "
                                  f"{report.usage.power.energy_kwh:.2f} kWh")
    assert report.to_dict()["usage"]["power"]["mig_gpu_labels"] == []
