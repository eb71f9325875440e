"""What a new user's trial of `gpuwise report` found on jobs whose GPUs differ (an RTX 4090 beside an A100; MIG
instances of two profiles beside an H100): they were reported, priced and compared as N of the first GPU, with a
warning that the job "cannot have run" on it. Also: a typo in --columns silently dropped a column and the report
then blamed MIG; a rented MIG slice's `*` row was missing; a 5 s run was drawn on a minute's axis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.report import build_report
from gpuwise.report.errors import ReportError
from gpuwise.report.html import render_html
from gpuwise.report.text import rows_shown

from tests.report.helpers import gpuwise_run_log, one_line, text_of

FIXTURES = Path(__file__).parent.parent / "fixtures"
MIXED_CSV = FIXTURES / "mixed_4090_a100_smi.csv"      # GPU 0 RTX 4090 (19.5 GiB, 80%), GPU 1 A100 80GB (58.6 GiB, 30%)
MIG_H100 = FIXTURES / "replay_mig_a100_h100.json"     # A100 MIG 1g.10gb + 3g.40gb, and an H100
GIB = 2**30


def run_log(path: Path, frames: list[list[dict]], step_s: float = 1.0) -> Path:
    """A finished `gpuwise run` log of ``frames``, one every ``step_s``."""
    return gpuwise_run_log(path, [[{**s, "t_s": step_s * k} for s in frame] for k, frame in enumerate(frames)])


def test_gpus_of_different_models_are_reported_per_kind_not_as_n_of_the_first(catalog, tmp_path):
    # the defect: "2 × NVIDIA GeForce RTX 4090", priced and compared as two 4090s, "the job's measured peak
    # 58.6 GiB is more than the 24.0 GiB of RTX 4090: the job cannot have run on it", HTML "of 80 GiB"
    report = build_report(MIXED_CSV, catalog)
    d = report.to_dict()
    assert d["gpu_name"] is None and d["right_sizing"] is None and d["cheaper"] == [] and d["warnings"] == []
    assert d["busy_share"] is None            # no mean over an RTX 4090 and an A100 stands for either
    kinds = {k["name"]: k for k in d["gpu_kinds"]}
    assert kinds["NVIDIA GeForce RTX 4090"]["needed_peak_bytes"] == 20000 * 2**20
    assert kinds["NVIDIA GeForce RTX 4090"]["busy_share"] == pytest.approx(0.8)
    assert kinds["NVIDIA A100-SXM4-80GB"]["needed_peak_bytes"] == 60000 * 2**20
    assert kinds["NVIDIA A100-SXM4-80GB"]["labels"] == ["1"]
    assert d["usage"]["mixed_gpus"] is True
    text = one_line(text_of(report))
    assert "2 × NVIDIA GeForce RTX 4090" not in text and "cannot have run" not in text
    assert "2 GPUs of 2 kinds" in text
    assert "1 × NVIDIA GeForce RTX 4090 (GPU 0): peak 19.5 GiB, p95 19.5 GiB of 24.0 GiB (81%), busy 80%" in text
    assert "1 × NVIDIA A100-SXM4-80GB (GPU 1): peak 58.6 GiB, p95 58.6 GiB of 80.0 GiB (73%), busy 30%" in text
    assert "the job's GPUs differ in kind" in text and "no cheaper-GPU comparison" in text
    assert "Verdict" not in text and "Rented" not in text
    page = render_html(report)
    assert "2 GPUs of 2 kinds" in page and "× NVIDIA GeForce RTX 4090</td>" not in page
    assert "RTX 4090 (GPU 0): peak 19.5 GiB, p95 19.5 GiB of 24.0 GiB" in page


def test_gpus_of_different_kinds_compared_as_one_when_gpu_names_it(catalog):
    report = build_report(MIXED_CSV, catalog, gpu="a100-80gb-sxm4")
    r = report.right_sizing
    assert r is not None and r.gpu_count == 2 and r.rented_gpu_id == "a100-80gb-sxm4"
    assert r.busy_share_used == pytest.approx(0.55)      # both GPUs' busy share, not "unknown: 100%"
    assert report.warnings == ()


def test_mig_instances_of_two_profiles_and_an_h100_are_three_kinds(catalog, tmp_path):
    # the defect (watch --log of this replay): "3 × NVIDIA A100-SXM4-80GB MIG 1g.10gb", busy 35% from the H100 alone
    data = json.loads(MIG_H100.read_text())
    log = run_log(tmp_path / "mig.db", data["frames"] * 2)
    report = build_report(log, catalog)
    d = report.to_dict()
    assert [k["name"] for k in d["gpu_kinds"]] == ["NVIDIA A100-SXM4-80GB MIG 1g.10gb",
                                                    "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "NVIDIA H100 80GB HBM3"]
    assert d["busy_share"] is None and d["right_sizing"] is None and d["gpu_name"] is None
    text = one_line(text_of(report))
    assert "3 × NVIDIA A100" not in text and "2 GPUs of 3 kinds (GPU 0 as 2 MIG instances)" in text
    assert "(GPU 0's MIG instance 0): peak 3.9 GiB" in text and "busy unknown" in text and "(GPU 1): peak 11.5 GiB" in text
    # the two instances report their GPU's power: counted once (210 W + the H100's 300 W)
    assert d["usage"]["power"]["gpu_count"] == 2
    assert d["usage"]["power"]["mean_total_w"] == pytest.approx(300.0 + sum(210.0 + i for i in range(8)) / 8)


def test_a_rented_mig_slice_that_holds_the_job_has_its_starred_row(catalog, tmp_path):
    # the defect: `report mig_one.db --gpu-price 5`: no `*` row, though docs say it is shown when it holds the job
    frame = [{"gpu_index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_used_bytes": 25 * GIB,
              "memory_total_bytes": 80 * GIB, "power_w": 210.0},
             {"gpu_index": 0, "mig_index": 1, "gpu_instance_id": 2, "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
              "memory_used_bytes": 20 * GIB, "memory_total_bytes": int(39.5 * GIB),
              "process_memory_bytes": int(19.5 * GIB), "power_w": 210.0}]
    log = run_log(tmp_path / "slice.db", [frame] * 12)
    report = build_report(log, catalog, gpu_price=(5.0, "CNY"))
    r = report.right_sizing
    rented = [o for o in rows_shown(r) if o.rented]
    assert [o.gpu_id for o in rented] == ["a100-80gb-sxm4-mig-3g.40gb"] and rented[0].fits
    text = one_line(text_of(report))
    assert "a100-80gb-sxm4-mig-3g.40gb *" in text and "* the rented GPU" in text


def test_a_typo_in_columns_is_refused_naming_it_and_the_close_fields(catalog, tmp_path):
    # the defect: utilization.gpus was silently ignored, then "no utilisation for some GPU (MIG without GPM?)"
    log = tmp_path / "nohdr.csv"
    log.write_text("".join(f"2026/11/01 10:00:{s:02d}.000, NVIDIA A100-SXM4-40GB, 0, 30 %, 12000 MiB, 40960 MiB, "
                           f"150 W\n" for s in range(0, 60, 5)))
    with pytest.raises(ReportError) as err:
        build_report(log, catalog, columns="timestamp,name,index,utilization.gpus,memory.used,memory.total,"
                                             "power.draw".split(","))
    said = str(err.value)
    assert "\n" not in said and "'utilization.gpus'" in said and "did you mean: utilization.gpu" in said
    # a real nvidia-smi field the report does not use holds its place, and a note says it is not read
    report = build_report(log, catalog, columns="timestamp,name,index,fan.speed,memory.used,memory.total,"
                                                "power.draw".split(","))
    notes = " ".join(report.notes)
    assert "fan.speed not read" in notes
    assert "no utilisation for GPU 0" in notes and "MIG" not in notes     # a CSV log: no MIG hint


def test_a_run_of_seconds_is_drawn_on_an_axis_of_seconds():
    # the defect: a 5 s run on a 0-1 min axis, its lines filling 8% of the plot
    from gpuwise.report.html import time_axis

    assert time_axis(5.0) == (1.0, "seconds")
    assert time_axis(3600.0) == (60.0, "minutes")
