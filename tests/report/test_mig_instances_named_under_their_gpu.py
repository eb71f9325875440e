"""The per-kind line named a GPU's MIG instances by their raw labels, "(GPUs 7/mig0, 7/mig1)", which reads as GPUs.
Devices are said in words in one place (``usage.gpu_labels``), MIG instances under their GPU: "GPU 7's MIG
instances 0, 1", in the text, the HTML and its plot."""

from __future__ import annotations

import html

import matplotlib.axes
import pytest

from gpuwise.report import build_report
from gpuwise.report.html import render_html
from gpuwise.report.usage import gpu_labels

from tests.report.helpers import gpuwise_run_log, one_line, text_of

GIB = 2**30
A100 = "NVIDIA A100-SXM4-80GB"
SLICE = f"{A100} MIG 3g.40gb"


def _frame(t_s: float) -> list[dict]:
    """GPUs 0-6 whole and busy; GPU 7 split into two 3g.40gb instances, each busy with 20 GiB."""
    whole = [dict(t_s=t_s, gpu_index=i, uuid=f"GPU-{i}", name=A100, utilization_pct=80.0, memory_used_bytes=30 * GIB,
                  memory_total_bytes=80 * GIB, power_w=300.0) for i in range(7)]
    parent = dict(t_s=t_s, gpu_index=7, uuid="GPU-7", name=A100, memory_used_bytes=40 * GIB,
                  memory_total_bytes=80 * GIB, power_w=250.0)
    return whole + [parent] + [dict(t_s=t_s, gpu_index=7, mig_index=m, gpu_instance_id=m + 1, uuid=f"MIG-7-{m}",
                                    name=SLICE, memory_used_bytes=20 * GIB, memory_total_bytes=40 * GIB, power_w=250.0)
                               for m in range(2)]


@pytest.fixture
def legend_labels(monkeypatch):
    """The labels of the lines the HTML's plots draw (Axes.axhline included)."""
    labels: list[str] = []
    axhline = matplotlib.axes.Axes.axhline

    def recording(self, *args, **kwargs):
        labels.append(kwargs.get("label"))
        return axhline(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "axhline", recording)
    return labels


def test_each_kinds_line_names_mig_instances_under_their_gpu(tmp_path, catalog, legend_labels):
    report = build_report(gpuwise_run_log(tmp_path / "mig8.db", [_frame(float(t)) for t in range(20)]), catalog)
    said = f"2 × {SLICE} (GPU 7's MIG instances 0, 1): peak 20.0 GiB"
    text = one_line(text_of(report))
    assert said in text and "7/mig" not in text
    page = html.unescape(render_html(report))
    assert said in page and "7/mig" not in page
    assert f"memory of {SLICE} (GPU 7's MIG instances 0, 1)" in legend_labels
    assert f"memory of {A100} (GPUs 0-6)" in legend_labels


@pytest.mark.parametrize("labels, words", [
    (("0/mig0",), "GPU 0's MIG instance 0"),
    (("7/mig0", "7/mig1"), "GPU 7's MIG instances 0, 1"),
    (("0", "1", "2", "7/mig1"), "GPUs 0-2 and GPU 7's MIG instance 1"),
    (("6/mig0", "6/mig1", "7/mig0"), "GPU 6's MIG instances 0, 1 and GPU 7's MIG instance 0"),
    (("3",), "GPU 3"), (("4", "5", "6", "7"), "GPUs 4-7"), (("0", "2", "5"), "GPUs 0, 2, 5"),
])
def test_devices_are_said_in_words(labels, words):
    assert gpu_labels(labels) == words
