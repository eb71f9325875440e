"""The step time is shown with the error the benchmark measured on runs the model was never fitted on
(runtime/accuracy.py; benchmarks/time_accuracy.py writes the figures)."""

from __future__ import annotations

import pytest

from gpuwise.runtime.accuracy import TimeAccuracy, load_accuracy


def test_the_shipped_figures_are_consistent():
    acc = load_accuracy()
    assert acc is not None and acc.cases >= 100          # test side + wider set + fresh check's held-out rows
    assert 0 < acc.median_abs_error <= acc.p90_abs_error
    assert 0 < acc.ratio_q10 < acc.ratio_q90
    assert acc.date and "held out" in acc.source


def test_the_likely_range_is_where_measurements_fell_given_the_prediction():
    acc = TimeAccuracy(cases=10, median_abs_error=0.2, p90_abs_error=0.4, signed_median_error=-0.1,
                       ratio_q10=0.5, ratio_q90=1.25)
    lo, hi = acc.likely_range_s(1.0)
    # predicted / measured = 1.25 at the 90th percentile: the measurement was 0.8 s; at the 10th, 2 s
    assert (lo, hi) == pytest.approx((0.8, 2.0))


def _text(argv: list[str], capsys) -> str:
    from gpuwise.cli.app import main

    capsys.readouterr()
    try:
        main(argv)
    except SystemExit as exc:
        assert not exc.code
    return capsys.readouterr().out


def test_estimate_gives_the_range_in_json_and_text(cli_json, capsys):
    argv = ["estimate", "torchvision:resnet18", "--gpu", "a100-80gb-sxm4", "--batch-size", "8"]
    out = cli_json([*argv, "--json"])
    step = out["time"]["step_time_s"]
    lo, hi = out["time"]["likely_step_time_range_s"]
    assert lo < step < hi
    assert out["time_accuracy"]["cases"] == load_accuracy().cases
    text = _text(argv, capsys)
    assert "likely " in text and "held-out public runs" in text


def test_recommend_says_how_far_times_and_costs_may_be(cli_json, capsys):
    argv = ["recommend", "torchvision:resnet18", "--batch-size", "8", "--samples", "1000", "--gpus", "t4,a10"]
    out = cli_json([*argv, "--json"])
    assert out["time_accuracy"]["ratio_q10"] == load_accuracy().ratio_q10
    assert "held-out public runs took" in _text(argv, capsys)
