"""recommend's duration and spot options, declared once (cli/common) with plan.spot's defaults.

Was: ``recommend --spot --checkpoint-every 0m`` gave "3600", a bare number, as an example in its refusal, while
``--deadline 12`` is refused for lacking a unit; and recommend declared ``--preemptions-per-hour`` and
``--checkpoint-every`` itself, with 0.05 and "30m" written in beside advise's own declaration of them."""

from __future__ import annotations

import re
import typing

import pytest

from gpuwise.cli import common as c
from gpuwise.errors import GpuwiseError
from gpuwise.plan.spot import DEFAULT_CHECKPOINT_INTERVAL_S, DEFAULT_PREEMPTIONS_PER_HOUR, SpotRisk
from gpuwise.units import parse_duration_s

REFUSED = [("--checkpoint-every", "0m", ["--spot"]), ("--checkpoint-every", "soon", ["--spot"]),
           ("--deadline", "0h", []), ("--ttft", "0", ["--mode", "infer"]), ("--tpot", "-5ms", ["--mode", "infer"])]


def _examples(err: str) -> list[str]:
    found = re.search(r"\(examples: ([^);]*)[);]", err)      # the examples end where the units are named
    assert found, err
    return [e.strip() for e in found.group(1).split(",")]


@pytest.mark.parametrize("option, value, more", REFUSED)
def test_a_refused_duration_gives_examples_each_with_a_unit(cli_run, option, value, more):
    code, out, err = cli_run("recommend", "torchvision:resnet18", "--samples", "10", *more, option, value)
    assert code == 2 and not out
    examples = _examples(err)
    assert examples and all(re.fullmatch(r"(\d+(\.\d+)?[a-z]+)+", e) for e in examples), err
    for example in examples:
        assert parse_duration_s(example) > 0


def test_duration_option_examples_have_units_by_default():
    with pytest.raises(GpuwiseError) as refused:
        c.duration_option("--restart-time", "0m")
    assert all(re.search(r"[a-z]$", e) for e in _examples(str(refused.value))), str(refused.value)


def _help(opt) -> str:
    return typing.get_args(opt)[1].help


def test_the_spot_options_state_plan_spots_defaults():
    rate = re.search(r"default ([\d.]+)", _help(c.PreemptionsPerHourOpt))
    every = re.search(r"default (\w+)\)", _help(c.CheckpointEveryOpt))
    assert float(rate.group(1)) == DEFAULT_PREEMPTIONS_PER_HOUR
    assert parse_duration_s(every.group(1)) == DEFAULT_CHECKPOINT_INTERVAL_S


def test_spot_risk_of_the_options_left_out_is_plan_spots_and_given_ones_are_read():
    assert c.spot_risk(None, None) == SpotRisk()
    assert c.spot_risk(1.0, "2h") == SpotRisk(1.0, 7200.0)
    with pytest.raises(GpuwiseError, match="--checkpoint-every"):
        c.spot_risk(None, "0m")


def test_recommend_declares_the_shared_spot_options(cli_run):
    code, out, err = cli_run("recommend", "--help")
    assert code == 0, err
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out).split())
    for name, opt in (("--preemptions-per-hour", c.PreemptionsPerHourOpt), ("--checkpoint-every", c.CheckpointEveryOpt)):
        assert re.search(rf"{name} <\w+> {re.escape(' '.join(_help(opt).split()))}", said), said
    assert "[default:" not in said.split("--preemptions-per-hour", 1)[1].split("--effective-batch", 1)[0]
