"""MIG instances are slices of their GPU, not GPUs: an 8-GPU machine whose GPU 7 is split into two MIG 3g.40gb
instances was reported as "9 GPUs of 2 kinds" and, compared as an A100 (--gpu), priced as 9 A100s. The GPU count and
the price (per whole GPU rented) count physical GPUs (``usage.physical_gpus``, the rule the power already counts a
GPU's instances once by); the instances are said under their GPU. A job on MIG slices compared as the slice still
pays per slice."""

from __future__ import annotations

import html

import pytest

from gpuwise.report import build_report
from gpuwise.report.html import render_html

from tests.report.helpers import gpuwise_run_log, one_line, text_of

GIB = 2**30
A100 = "NVIDIA A100-SXM4-80GB"
SLICE = f"{A100} MIG 3g.40gb"


def whole(t_s: float, index: int) -> dict:
    return dict(t_s=t_s, gpu_index=index, uuid=f"GPU-{index}", name=A100, utilization_pct=80.0,
                memory_used_bytes=30 * GIB, memory_total_bytes=80 * GIB, power_w=300.0)


def split(t_s: float, index: int) -> list[dict]:
    """GPU ``index``'s parent row and its two 3g.40gb instances (each busy with 20 GiB), as NVML lists them."""
    parent = dict(t_s=t_s, gpu_index=index, uuid=f"GPU-{index}", name=A100, memory_used_bytes=40 * GIB,
                  memory_total_bytes=80 * GIB, power_w=250.0)
    return [parent] + [dict(t_s=t_s, gpu_index=index, mig_index=m, gpu_instance_id=m + 1, uuid=f"MIG-{index}-{m}",
                            name=SLICE, memory_used_bytes=20 * GIB, memory_total_bytes=40 * GIB, power_w=250.0)
                       for m in range(2)]


@pytest.fixture
def eight_gpus_one_split(tmp_path):
    """GPUs 0-6 whole A100s, GPU 7 split into two MIG instances: 20 samples, 1 s apart."""
    frames = [[whole(float(t), i) for i in range(7)] + split(float(t), 7) for t in range(20)]
    return gpuwise_run_log(tmp_path / "mig8.db", frames)


def test_eight_gpus_one_of_them_split_into_two_mig_instances_are_eight_gpus(eight_gpus_one_split, catalog):
    report = build_report(eight_gpus_one_split, catalog)
    d = report.to_dict()
    assert (d["gpu_count"], d["device_count"]) == (8, 9)
    assert d["usage"]["job_gpus"] == [str(i) for i in range(8)]
    header = one_line(text_of(report)).split(" The job's")[0]
    assert "8 GPUs of 2 kinds (GPU 7 as 2 MIG instances)" in header and "9 GPUs" not in header
    assert "8 GPUs of 2 kinds (GPU 7 as 2 MIG instances)" in html.unescape(render_html(report))
    assert any("prices the run as 8 GPUs of one kind; --gpu NAME compares them as 8 × that GPU" in n
               for n in report.notes)


def test_compared_as_one_whole_gpu_kind_the_run_is_priced_per_physical_gpu(eight_gpus_one_split, catalog):
    report = build_report(eight_gpus_one_split, catalog, gpu="a100-80gb", gpu_price=(2.0, "CNY"))
    r = report.right_sizing
    assert r.gpu_count == 8
    rented = next(o for o in r.options if o.rented)
    assert rented.price_per_hour_all_gpus == pytest.approx(8 * 2.0)
    text = one_line(text_of(report))
    assert "Rented: 8 × NVIDIA A100 80GB SXM4 at ¥2.00/h per GPU = ¥16.00/h for 8 GPUs" in text


def test_two_instances_of_one_gpu_rented_as_slices_are_priced_per_slice_and_said_under_their_gpu(tmp_path, catalog):
    frames = [split(float(t), 0) for t in range(20)]
    report = build_report(gpuwise_run_log(tmp_path / "slices.db", frames), catalog, gpu_price=(5.0, "CNY"))
    assert report.right_sizing.gpu_count == 2 and report.right_sizing.rented_gpu_id == "a100-80gb-sxm4-mig-3g.40gb"
    assert (report.to_dict()["gpu_count"], report.to_dict()["device_count"]) == (1, 2)
    assert f"2 × {SLICE} (GPU 0 as 2 MIG instances)" in one_line(text_of(report))
