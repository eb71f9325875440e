"""Trial 2: after `gpuwise calibrate run1.db`, `gpuwise report run1.db` showed the step time's error (-0.1 %) as if
it checked the prediction, though the calibration was fitted on that very run. The report now says the error is
in-sample (text: on the step time line and below the table; JSON: ``predicted_vs_measured.in_sample``), found by the
run fingerprints the calibration file stores. Real calibrate and report commands, real run logs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gpuwise.cli.app import main
from tests.calibrate.helpers import synthetic_log, write_model
from tests.report.helpers import one_line


@pytest.fixture
def gpuwise(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(tmp_path / "config"))   # never the user's calibration
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main([str(a) for a in args])
        out, err = capsys.readouterr()
        assert exit_info.value.code in (0, None), err
        return SimpleNamespace(stdout=out, stderr=err)

    return run


@pytest.fixture
def runs(tmp_path):
    """Two runs of one MLP on an RTX 4090 (the second a little slower) and the --model options of their job."""
    spec = write_model(tmp_path)
    workload = {"model": spec, "batch_size": 16, "precision": "fp32", "optimizer": "adamw"}
    first = synthetic_log(tmp_path / "run1.db", workload=workload, step_time_s=0.010)
    second = synthetic_log(tmp_path / "run2.db", workload=workload, step_time_s=0.012)
    options = ("--model", spec, "--batch-size", "16", "--precision", "fp32", "--optimizer", "adamw")
    return first, second, options


def _step_row(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith("step time"))


def test_a_run_the_calibration_was_fitted_on_is_said_in_sample(gpuwise, runs):
    first, _second, options = runs
    gpuwise("calibrate", first)
    out = json.loads(gpuwise("report", first, *options, "--json").stdout)
    assert out["predicted_vs_measured"]["calibration"] and out["predicted_vs_measured"]["in_sample"] is True
    text = gpuwise("report", first, *options).stdout
    assert "in-sample" in _step_row(text)
    assert "in-sample: this run is one of your calibration's" in one_line(text)


def test_a_run_the_calibration_was_not_fitted_on_is_a_check(gpuwise, runs):
    first, second, options = runs
    gpuwise("calibrate", first)
    out = json.loads(gpuwise("report", second, *options, "--json").stdout)
    assert out["predicted_vs_measured"]["calibration"] and out["predicted_vs_measured"]["in_sample"] is False
    assert "in-sample" not in gpuwise("report", second, *options).stdout


def test_without_the_users_calibration_the_shipped_models_error_is_no_in_sample(gpuwise, runs):
    first, _second, options = runs
    gpuwise("calibrate", first)
    out = json.loads(gpuwise("report", first, *options, "--no-user-calibration", "--json").stdout)
    assert out["predicted_vs_measured"]["calibration"] is None and out["predicted_vs_measured"]["in_sample"] is False
