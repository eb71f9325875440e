"""A new user's sweep of the CLI's inputs: each defect it found, as the behaviour now expected. Every refusal is one
line on stderr naming the option, exit code 2, nothing on stdout; every input that changes nothing is warned about.
All of them are said before any trace (fast)."""

from __future__ import annotations

import json
import math

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures"
SMI_CSV = str(FIXTURES / "seed_a100_smi.csv")


@pytest.fixture
def loss_csv(tmp_path):
    """A loss curve that flattens: advise diagnoses it and prices the rest of the run."""
    rows = "".join(f"{s},{0.5 + 2.0 * math.exp(-s / 60) + 0.01 * math.sin(s * 7.3):.6g},{1.7e9 + 0.5 * s}\n"
                   for s in range(1000))
    path = tmp_path / "plateau.csv"
    path.write_text("step,loss,t_s\n" + rows)
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def _refused(result, *said: str) -> str:
    code, out, err = result
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, (code, out, err)
    for words in said:
        assert words in lines[0], lines[0]
    return lines[0]


# 1 -- a step count that overflows: refused up front, never a traceback ------------------------------------------
@pytest.mark.parametrize("args, said", [
    (["estimate", "torchvision:resnet18", "--gpu", "t4", "--samples", "1000", "--epochs", "1e308"], ("--epochs", "2^53")),
    (["recommend", "torchvision:resnet18", "--samples", "1000", "--epochs", "1e308", "--max-gpus", "1",
      "--provider", "autodl"], ("--epochs", "2^53")),
    (["recommend", "torchvision:resnet18", "--steps", "99999999999999999", "--max-gpus", "1"], ("--steps", "2^53")),
])
def test_a_job_of_more_steps_than_gpuwise_counts_is_refused(cli_run, home, args, said):
    _refused(cli_run(*args), *said)


def test_advise_total_steps_past_the_one_step_cap_is_refused(cli_run, home, loss_csv):
    _refused(cli_run("advise", str(loss_csv), "--gpu", "rtx-4090", "--total-steps", "9" * 26), "--total-steps", "2^53")


def test_the_step_cap_has_one_home():
    from gpuwise.advise import readers
    from gpuwise.plan.constraints import MAX_STEPS

    assert readers.MAX_STEP is MAX_STEPS


# 2 -- no NaN or infinity reaches the output ----------------------------------------------------------------------
@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_a_step_time_whose_costs_overflow_is_refused_not_printed_as_inf(cli_run, home, loss_csv, json_flag):
    line = _refused(cli_run("advise", str(loss_csv), "--gpu", "rtx-4090", "--step-time-s", "1e308", *json_flag),
                    "--step-time-s")
    assert "inf" not in line.replace("finite", "") and "nan" not in line


def test_print_json_refuses_nan_and_infinity(capsys):
    from gpuwise.cli.common import print_json
    from gpuwise.errors import GpuwiseError

    with pytest.raises(GpuwiseError, match=r"plan\.cost is not a finite number"):
        print_json({"plan": {"cost": float("inf")}})
    assert capsys.readouterr().out == ""
    print_json({"cost": None, "hours": 1.5})
    assert json.loads(capsys.readouterr().out) == {"cost": None, "hours": 1.5}


# 3 -- workload options are checked whether or not --model is given ------------------------------------------------
@pytest.mark.parametrize("command, option", [
    (["report", SMI_CSV, "--batch-size", "-5", "--seq-len", "-1"], "--batch-size"),
    (["report", SMI_CSV, "--sharding", "bogus"], "--sharding"),
    (["report", SMI_CSV, "--lora-dropout", "nan"], "--lora-dropout"),
    (["advise", "LOSS", "--batch-size", "-5"], "--batch-size"),
    (["run", "--log", "x.db", "--sharding", "bogus", "--seq-len", "-1", "--", "true"], "--sharding"),
])
def test_bad_workload_options_are_refused_without_model(cli_run, home, loss_csv, command, option):
    _refused(cli_run(*[str(loss_csv) if a == "LOSS" else a for a in command]), option)
    assert not (home / "x.db").exists()        # run: refused before the command, no run log written


def test_a_workload_option_without_model_is_said_to_change_nothing(cli_run, home):
    code, out, err = cli_run("report", SMI_CSV, "--seq-len", "128", "--precision", "bf16", "--json")
    assert code == 0, err
    json.loads(out)
    assert "--seq-len has no effect without --model" in err
    assert "--precision" not in err           # read without a model: the datasheet ratio's precision


# 4 -- advise checks currency, price and provider with or without --gpu --------------------------------------------
@pytest.mark.parametrize("args, said", [
    (["--gpu-price", "5XYZ"], "--gpu-price"),
    (["--currency", "XYZ"], "--currency"),
    (["--provider", "nope"], "--provider"),
])
def test_advise_checks_prices_without_gpu(cli_run, home, loss_csv, args, said):
    _refused(cli_run("advise", str(loss_csv), *args), said)


# 5 -- an empty value is refused, naming the option, not read as "not given" --------------------------------------
@pytest.mark.parametrize("args, said", [
    (["estimate", "torchvision:resnet18", "--gpu", ""], "--gpu ''"),
    (["advise", "LOSS", "--gpu", ""], "--gpu ''"),
    (["report", ""], "LOG ''"),
    (["report", SMI_CSV, "--model", ""], "--model ''"),
    (["calibrate", ""], "LOG ''"),
    (["run", "--log", "", "--", "true"], "--log ''"),
    (["recommend", "torchvision:resnet18", "--samples", "10", "--gpus", ""], "--gpus ''"),
])
def test_an_empty_value_is_refused(cli_run, home, loss_csv, args, said):
    _refused(cli_run(*[str(loss_csv) if a == "LOSS" else a for a in args]), said, "names no")
    assert not list(home.glob("gpuwise-run-*"))


def test_watch_refuses_an_empty_gpu(cli_run, home, monkeypatch):
    monkeypatch.setenv("GPUWISE_MONITOR_BACKEND", f"replay:{FIXTURES / 'replay_two_a100.json'}")
    _refused(cli_run("watch", "--count", "1", "--gpu", ""), "--gpu ''")


# 6 -- a flag that changes nothing is said to -----------------------------------------------------------------------
def test_epochs_without_samples_is_warned_about(cli_run, home):
    # --plot to a folder that does not exist stops estimate before its trace, after the warnings
    code, _, err = cli_run("estimate", "torchvision:resnet18", "--epochs", "3", "--plot", "nowhere/x.png")
    assert code == 2 and "--epochs has no effect without --samples" in err


def test_the_default_optimizer_named_in_inference_is_warned_about(caplog):
    from gpuwise.cli.workload_options import workload_from

    workload_from("torchvision:resnet18", {"mode": "infer", "optimizer": "adamw", "batch_size": "2"})
    assert "--optimizer adamw has no effect with --mode infer" in caplog.text
    caplog.clear()
    workload_from("torchvision:resnet18", {"mode": "infer", "batch_size": "2"})     # not named: nothing said
    assert "--optimizer" not in caplog.text


def test_calibrate_export_with_nothing_to_export_is_refused(cli_run, home):
    _refused(cli_run("calibrate", "--export", "x.jsonl"), "--export", "nothing written")
    _refused(cli_run("calibrate", "--export", str(home)), "--export", "is a directory")
    assert not (home / "x.jsonl").exists()


def test_report_columns_on_a_log_with_a_header_is_warned_about(cli_run, home):
    code, out, err = cli_run("report", SMI_CSV, "--columns", "foo,bar", "--json")
    assert code == 0, err
    json.loads(out)
    assert "--columns has no effect" in err and "header" in err


# 8 -- every refusal names its option -----------------------------------------------------------------------------
@pytest.mark.parametrize("args, said", [
    (["recommend", "torchvision:resnet18", "--samples", "10", "--checkpoint-every", "-5m"], "--checkpoint-every:"),
    (["advise", "LOSS", "--restart-time", "-5m"], "--restart-time:"),
    (["recommend", "torchvision:resnet18", "--samples", "10", "--budget", "5XYZ"], "--budget:"),
    (["report", SMI_CSV, "--currency", "XYZ"], "--currency:"),
    (["advise", "LOSS", "--num-gpus", "99999999999"], "--num-gpus must be a whole number between 1 and 4096"),
])
def test_refusals_name_the_option(cli_run, home, loss_csv, args, said):
    _refused(cli_run(*[str(loss_csv) if a == "LOSS" else a for a in args]), said)
