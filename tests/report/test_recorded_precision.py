"""`report` on a gpuwise run log whose workload names a local model file (defect: it took the datasheet
ratio at amp-fp16, an unknown job's precision, though the log records fp32; the report `gpuwise run`
printed for the same log reads its precision). The file is never run on the log's word; its recorded
precision chooses the datasheet ratio's precision, and a note says so."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.runtime.rates import datasheet_time_ratio
from tests.calibrate.helpers import synthetic_log, write_model

RECORDED = "the precision the run log's workload records"


def _log(tmp_path, precision):
    spec = write_model(tmp_path)
    return synthetic_log(tmp_path / "run.db", step_time_s=0.01, workload={
        "model": spec, "batch_size": 16, "precision": precision, "optimizer": "adamw"})


def _time_notes(report):
    return [n for n in report["notes"] if n.startswith("time on other GPUs")]


def test_a_local_model_files_log_is_right_sized_at_its_recorded_precision(tmp_path, report_json):
    report = report_json(_log(tmp_path, "fp32"))
    assert report["predicted_vs_measured"] is None                 # the file is not run
    sizing = report["right_sizing"]
    assert "fp32 peak rates" in sizing["method_basis"]             # was "amp-fp16 peak rates"
    assert len(_time_notes(report)) == 1 and RECORDED in _time_notes(report)[0]
    catalog = load_catalog(None)
    here, there = resolve_gpu(catalog, "rtx-4090"), resolve_gpu(catalog, "rtx-a4000")
    a4000 = next(o for o in sizing["options"] if o["gpu"] == "rtx-a4000")
    assert a4000["step_time_ratio"] == pytest.approx(datasheet_time_ratio(here, there, "fp32"))
    assert a4000["step_time_ratio"] != pytest.approx(datasheet_time_ratio(here, there, "amp-fp16"), rel=0.05)


def test_a_precision_given_on_the_command_line_wins_over_the_logs(tmp_path, report_json):
    report = report_json(_log(tmp_path, "fp32"), "--precision", "amp-fp16")
    assert "amp-fp16 peak rates" in report["right_sizing"]["method_basis"]
    assert not any(RECORDED in n for n in report["notes"])


def test_a_log_recording_no_known_precision_keeps_an_unknown_jobs(tmp_path, report_json):
    report = report_json(_log(tmp_path, "fp13"))
    assert "amp-fp16 peak rates" in report["right_sizing"]["method_basis"]
    assert len(_time_notes(report)) == 1 and "no workload given" in _time_notes(report)[0]
