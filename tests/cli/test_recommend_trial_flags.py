"""A new user's trial of recommend's job and batch flags: a deadline of 0 pointed to a unit, then refused that;
--grad-accum was dropped in silence under --effective-batch; --input-rate did not say it is per GPU."""

from __future__ import annotations

import logging

import pytest

from gpuwise.cli.common import InputRateOpt

JOB = ["recommend", "torchvision:resnet18", "--precision", "amp-fp16", "--samples", "1000", "--gpus", "rtx-4090",
       "--provider", "autodl", "--max-gpus", "1"]


@pytest.mark.parametrize("value", ["0", "0.0", "0h", "-1", "-2h"])
def test_a_deadline_not_above_zero_is_refused_in_one_wording_whatever_its_unit(cli_run, value):
    """A bare 0 was refused in one wording ('--deadline 0: must be positive (e.g. ...)'), '0h' in another without
    examples, '-1' in a third: one rule (``units.parse_duration_s``), one sentence."""
    code, out, err = cli_run(*JOB, "--deadline", value)
    assert code == 2 and out == ""
    assert f"--deadline: duration must be positive: {value!r} (examples: 12h, 90m, 2d)" in err
    assert "give a unit" not in err and "\n" not in err.strip()


@pytest.mark.parametrize("args, refusal", [(["--epochs", "0"], "--epochs must be positive"),
                                           (["--epochs", "-2", "--steps", "0"], "--steps must be positive")])
def test_a_refused_job_size_comes_alone_without_the_epochs_warning(cli_run, args, refusal):
    job = [a for a in JOB if a not in ("--samples", "1000")]
    code, out, err = cli_run(*job, *([] if "--steps" in args else ["--steps", "100"]), *args)
    assert code == 2 and out == ""
    assert refusal in err and "has no effect" not in err and "\n" not in err.strip()


def test_a_bare_number_still_asks_for_its_unit(cli_run):
    code, _, err = cli_run(*JOB, "--deadline", "5")
    assert code == 2 and "give a unit" in err


def test_grad_accum_replaced_by_the_effective_batch_is_said(cli_run, caplog):
    with caplog.at_level(logging.WARNING, logger="gpuwise.cli"):
        code, _, err = cli_run(*JOB, "-b", "32", "--grad-accum", "2", "--effective-batch", "128", "--json")
    assert code == 0, err
    assert any("--grad-accum 2 has no effect with --effective-batch 128" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gpuwise.cli"):
        code, _, err = cli_run(*JOB, "-b", "32", "--grad-accum", "4", "--effective-batch", "128", "--json")
    assert code == 0 and not any("--grad-accum" in r.getMessage() for r in caplog.records)   # they agree


def test_the_input_rate_says_it_is_each_gpus():
    help_text = InputRateOpt.__metadata__[0].help
    assert "each GPU" in help_text
