"""The likely range of a torch.compile step (benchmarks/README.md, "Twentieth session"): timm's -dynamo runs of the
held-out families are compiled inference, so a compiled inference step gets their range; a compiled training step
is a regime of its own that no public run measures. Before, every --compile estimate said "no held-out run scores
the time of a torch.compile step", and a compiled training step would have shared whatever the inference runs gave."""

from __future__ import annotations

import pytest

from gpuwise.runtime.accuracy import load_accuracy

COMPILED = ["estimate", "torchvision:resnet50", "--batch-size", "256", "--precision", "amp-fp16", "--compile",
            "--gpu", "rtx-4090", "--json"]


@pytest.fixture(scope="module")
def compiled_figures():
    figures = load_accuracy("compiled")
    assert figures is not None and figures.cases >= 10       # the shipped file has the held-out rows' figures
    return figures


def test_a_compiled_inference_step_prints_the_compiled_runs_range(cli_json, compiled_figures):
    out = cli_json([*COMPILED, "--mode", "infer"])
    time = out["time"]
    assert time["regime"] == "compiled" and time["likely_range_note"] is None
    low, high = time["likely_step_time_range_s"]
    assert (low, high) == pytest.approx(compiled_figures.likely_range_s(time["step_time_s"]))
    assert out["time_accuracy"]["regime"] == "compiled" and out["time_accuracy"]["cases"] == compiled_figures.cases


def test_a_compiled_training_step_does_not_borrow_it(cli_json):
    out = cli_json([*COMPILED, "--optimizer", "sgd"])
    time = out["time"]
    assert time["regime"] == "compiled-train" and time["likely_step_time_range_s"] is None
    assert time["likely_range_note"] == "no held-out run measures this (a torch.compile training step)"
