"""recommend's messages from a new user's trial: a negative deadline's examples, an empty --gpus, a bare budget's
currency (the JSON's word for a bandwidth-bound option: tests/cli/test_narrow_output.py).

Before: `--deadline -5h` listed a bare 3600 (refused by --deadline) among its examples and printed two example lists;
`--gpus ''` meant every GPU; `--budget`'s help said nothing of the currency a bare number is in; the JSON said
`bound: "memory"` where the table said "bandwidth".
"""

from __future__ import annotations


import pytest


@pytest.fixture
def no_tracing(monkeypatch):
    import gpuwise.plan

    def traced(*_a, **_k):
        raise AssertionError("traced before refusing the input")

    monkeypatch.setattr(gpuwise.plan, "model_for", traced)


def _one_line(code: int, out: str, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    return lines[0]


def test_a_negative_deadline_says_positive_with_one_list_of_examples_that_have_units(cli_run, no_tracing):
    line = _one_line(*cli_run("recommend", "torchvision:resnet18", "--steps", "10", "--deadline", "-5h"))
    assert "positive" in line and line.count("e.g.") + line.count("examples") == 1
    examples = line[line.index("examples"):]
    assert "3600" not in examples and "12h" in examples


@pytest.mark.parametrize("given", ["", " ", ","])
def test_an_empty_gpus_is_refused_not_read_as_every_gpu(cli_run, no_tracing, given):
    line = _one_line(*cli_run("recommend", "torchvision:resnet18", "--steps", "10", "--gpus", given))
    assert "--gpus" in line and "names no GPU" in line


def test_the_budget_help_says_the_currency_of_a_bare_number(cli_run):
    code, out, _ = cli_run("recommend", "--help")
    assert code == 0
    text = " ".join(out.replace("│", " ").split())
    assert "A bare number (300) is in the ranking currency" in text

