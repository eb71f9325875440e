"""What a new user's trial of `gpuwise report` found: a GPU the catalog lacks made the report say that no GPU
holds the job, and a MIG slice was reported as the whole GPU at the whole GPU's price (real run logs)."""

from __future__ import annotations

import pytest

from gpuwise.report import build_report

from tests.report.helpers import gpuwise_run_log, one_line, text_of

MIB = 2**20
SLICE = "NVIDIA A100-SXM4-40GB MIG 1g.5gb"


def record(path, name: str, used_bytes: int, total_bytes: int):
    """A finished `gpuwise run` log of one device named ``name``: ten minutes at 60% busy."""
    frames = [[{"t_s": 60.0 * k, "gpu_index": 0, "name": name, "utilization_pct": 60.0,
                "memory_used_bytes": used_bytes, "memory_total_bytes": total_bytes, "power_w": 150.0}]
              for k in range(11)]
    return gpuwise_run_log(path, frames)


def test_a_gpu_the_catalog_lacks_lists_the_gpus_that_hold_the_job_not_that_none_does(tmp_path, catalog):
    # the defect: "No GPU in the catalog holds 19.5 GiB" while --json listed GPUs with fits: true
    path = record(tmp_path / "titan.db", "NVIDIA TITAN RTX", 20000 * MIB, 24576 * MIB)
    report = build_report(path, catalog)
    holding = [o["gpu"] for o in report.to_dict()["right_sizing"]["options"] if o["fits"]]
    assert "rtx-4090" in holding
    text = one_line(text_of(report))
    assert "No GPU in the catalog holds" not in text
    assert "the rented GPU is not in the catalog, so no time× or saving can be computed" in text
    assert f"{len(holding)} GPU(s) of the catalog hold 19.5 GiB" in text
    assert "rtx-a5000 24 - ¥1.20" in text and "rtx-4090 24 - ¥1.98" in text   # those that hold it, cheapest first


def test_no_gpu_holds_is_still_said_when_none_does(tmp_path, catalog):
    path = record(tmp_path / "titan.db", "NVIDIA TITAN RTX", 20000 * MIB, 24576 * MIB)
    report = build_report(path, catalog, headroom_fraction=0.99)
    assert "No GPU in the catalog holds 19.5 GiB with 99% of its memory kept free" in one_line(text_of(report))


def test_a_mig_slice_is_reported_as_the_slice_not_the_whole_gpu_at_its_price(tmp_path, catalog):
    # the defect: the profile was stripped: a 1/7 slice reported as a full A100 40GB at the full A100's price
    path = record(tmp_path / "mig.db", SLICE, 3 * 2**30, 4864 * MIB)
    report = build_report(path, catalog)
    r = report.right_sizing
    assert r.rented_gpu_id == "a100-40gb-sxm4-mig-1g.5gb" and r.rented_price_per_gpu_hour is None
    (said,) = [n for n in report.notes if "MIG slice" in n]
    assert "MIG slice 1g.5gb of a100-40gb-sxm4: 5 GB, 1/7 of its compute" in said and "prices whole GPUs" in said
    assert any("no price for a100-40gb-sxm4-mig-1g.5gb" in n and "--gpu-price" in n for n in report.notes)
    assert not report.warnings                           # 3 GiB fits the slice's memory
    text = one_line(text_of(report))
    assert "MIG slice 1g.5gb" in text and "Rented:" not in text
    assert "No GPU in the catalog holds" not in text


def test_a_mig_slice_with_the_price_paid_compares_against_that_price(tmp_path, catalog):
    path = record(tmp_path / "mig.db", SLICE, 3 * 2**30, 4864 * MIB)
    report = build_report(path, catalog, gpu_price=(2.0, "CNY"))
    assert report.right_sizing.rented_price_per_gpu_hour == pytest.approx(2.0)
    assert "Rented: 1 × NVIDIA A100 40GB SXM4 MIG 1g.5gb at ¥2.00/h per GPU (--gpu-price)" in one_line(text_of(report))


def test_gpu_option_takes_a_mig_name(tmp_path, catalog):
    # the defect: --gpu "NVIDIA H100 80GB HBM3 MIG 3g.40gb" exited 2 (unknown GPU)
    path = record(tmp_path / "dmon.db", "NVIDIA H100 80GB HBM3", 20 * 2**30, 81559 * MIB)
    report = build_report(path, catalog, gpu="NVIDIA H100 80GB HBM3 MIG 3g.40gb")
    assert report.compared_as == "NVIDIA H100 80GB SXM5 MIG 3g.40gb"
    assert report.right_sizing.rented_gpu_id == "h100-sxm-mig-3g.40gb"
    assert any("MIG slice 3g.40gb of h100-sxm: 40 GB, 3/7 of its compute" in n for n in report.notes)


def test_report_cli_takes_a_mig_gpu_name(tmp_path, cli_run):
    path = record(tmp_path / "r.db", "NVIDIA H100 80GB HBM3", 20 * 2**30, 81559 * MIB)
    code, out, err = cli_run("report", str(path), "--gpu", "NVIDIA H100 80GB HBM3 MIG 3g.40gb")
    assert code == 0, err
    assert "MIG 3g.40gb" in out
