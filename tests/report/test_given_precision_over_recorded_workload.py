"""`report LOG --precision P` on a run log that records a public model's workload (`gpuwise run --model …`):
the precision named was dropped without a word, the prediction and the time on other GPUs staying at the
record's precision, though docs/report.md makes a given --precision win over the recorded one, as `advise`'s
does (docs/advise.md: "--precision and --num-gpus given replace the record's")."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.scaling import time_scaling
from gpuwise.workload import Workload
from tests.calibrate.helpers import synthetic_log

RECORDED = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="fp32")


def test_a_precision_given_replaces_the_recorded_workloads_in_prediction_and_time_elsewhere(tmp_path, report_json):
    log = synthetic_log(tmp_path / "run.db", step_time_s=0.05, workload=RECORDED.to_dict())
    report = report_json(log, "--precision", "AMP-BF16")
    assert report["predicted_vs_measured"]["workload"]["precision"] == "amp-bf16"
    sizing = report["right_sizing"]
    assert sizing["method"] == "time predictor" and "amp-bf16" in sizing["method_basis"]
    given = time_scaling("amp-bf16", RECORDED.with_(precision="amp-bf16"))
    catalog = load_catalog(None)
    here, there = resolve_gpu(catalog, "rtx-4090"), resolve_gpu(catalog, "rtx-a4000")
    a4000 = next(o for o in sizing["options"] if o["gpu"] == "rtx-a4000")
    assert a4000["step_time_ratio"] == pytest.approx(given.ratio(here, there))
    assert a4000["step_time_ratio"] != pytest.approx(time_scaling("fp32", RECORDED).ratio(here, there), rel=1e-3)


def test_without_a_precision_the_recorded_one_stays(tmp_path, report_json):
    log = synthetic_log(tmp_path / "run.db", step_time_s=0.05, workload=RECORDED.to_dict())
    report = report_json(log)
    assert report["predicted_vs_measured"]["workload"]["precision"] == "fp32"
    assert "fp32" in report["right_sizing"]["method_basis"]
