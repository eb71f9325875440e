"""What a review of the CLI sweep's fixes found: a 400-digit --total-steps still a traceback, an empty
--precision or --optimizer taken for "not given" without --model, --request-rate without a model refused with
the placeholder's name, a preemption rate that made recommend print "inf years", an extra step from a float in a
fractional epoch, and an epoch time no test held."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpuwise.plan import JobSize
from gpuwise.plan.errors import PlanError
from gpuwise.plan.spot import SpotRisk

SMI_CSV = str(Path(__file__).parents[1] / "fixtures" / "seed_a100_smi.csv")


@pytest.fixture
def loss_csv(tmp_path):
    rows = "".join(f"{s},{0.5 + 2.0 * math.exp(-s / 60):.6g}\n" for s in range(400))
    path = tmp_path / "loss.csv"
    path.write_text("step,loss\n" + rows)
    return str(path)


def test_a_total_steps_too_long_for_a_float_is_one_line(cli_run, loss_csv):
    code, out, err = cli_run("advise", loss_csv, "--gpu", "rtx-4090", "--total-steps", "9" * 400)
    assert code == 2 and out == "" and "--total-steps must be at most 2^53" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--precision", "--optimizer"])
def test_an_empty_workload_name_is_refused_without_a_model(cli_run, flag):
    code, _, err = cli_run("report", SMI_CSV, flag, "")
    assert code == 2 and f"{flag}: unknown value ''" in err


def test_a_request_rate_without_a_model_is_said_to_do_nothing(cli_run, caplog):
    code, _, err = cli_run("report", SMI_CSV, "--request-rate", "5")
    assert code == 0, err
    assert any("--request-rate has no effect without --model" in r.getMessage() for r in caplog.records)
    assert "(no --model)" not in err


def test_a_preemption_rate_no_job_survives_is_refused():
    with pytest.raises(PlanError, match="--preemptions-per-hour must be at most 60"):
        SpotRisk(preemptions_per_hour=1e308)
    with pytest.raises(PlanError, match="--checkpoint-every must be at most"):
        SpotRisk(checkpoint_interval_s=1e308)
    SpotRisk(preemptions_per_hour=60.0)          # a preemption a minute: priced, if hopeless


def test_a_fraction_of_a_pass_counts_its_whole_samples():
    assert JobSize(samples=1000, epochs=1.1).optimizer_steps(100) == 11      # was 12: 100.00000000000009 samples
    assert JobSize(samples=100, epochs=2.1).optimizer_steps(10) == 21
    assert JobSize(samples=1000, epochs=0.3).optimizer_steps(100) == 3


def test_the_epoch_time_is_a_pass_of_whole_steps(cli_run):
    code, out, err = cli_run("estimate", "torchvision:resnet18", "--gpu", "t4", "--samples", "100", "--epochs", "10",
                             "-b", "64", "--json")
    assert code == 0, err
    t = json.loads(out)["time"]
    assert t["optimizer_steps"] == 20
    assert t["epoch_time_s"] == pytest.approx(2 * t["step_time_s"])
    assert t["total_time_s"] == pytest.approx(20 * t["step_time_s"])


@pytest.mark.parametrize("value", ["9" * 400, "inf", "5xyz", "0"])
def test_every_money_option_refuses_by_one_rule(cli_run, value):
    # report's --gpu-price parsed money its own way: a 400-digit price (an infinite float) was taken
    _, _, report_err = cli_run("report", SMI_CSV, "--gpu-price", value)
    _, _, budget_err = cli_run("recommend", "torchvision:resnet18", "--samples", "100", "--gpus", "t4",
                               "--budget", value)
    assert report_err.startswith("gpuwise: error: --gpu-price: ")
    assert budget_err.startswith("gpuwise: error: --budget: ")
    assert report_err.split("--gpu-price: ", 1)[1] == budget_err.split("--budget: ", 1)[1]


def test_a_default_choice_in_another_case_is_not_said_to_do_nothing(cli_run, caplog):
    # was: `report X --mode TRAIN --finetune FULL` warned that both options do nothing without --model, though
    # the workload reads them as the defaults (train, full) it would take unasked
    code, _, err = cli_run("report", SMI_CSV, "--mode", "TRAIN", "--finetune", "FULL", "--kv-cache-dtype", "Auto")
    assert code == 0, err
    assert not any("has no effect without --model" in r.getMessage() for r in caplog.records)
    code, _, err = cli_run("report", SMI_CSV, "--mode", "INFER")
    assert code == 0, err
    assert any("--mode has no effect without --model" in r.getMessage() for r in caplog.records)
