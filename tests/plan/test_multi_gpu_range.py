"""The likely range of a multi-GPU step (benchmarks/README.md, "Nineteenth session"): its own regime's figures,
never the single-GPU one's; the regime says what the held-out runs measure (data-parallel training within one
node: Lambda's 2-8 GPU systems), and a sharded or multi-node step, which no held-out run measures, is a regime of
its own. Before, every multi-GPU option said "no held-out run measures this (a multi-GPU step)" although the
multi-GPU held-out set exists, and a sharded or 4-node step would have borrowed its range once it had one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import gpuwise.plan.accuracy as plan_accuracy
import gpuwise.runtime.accuracy as accuracy
from gpuwise.plan.accuracy import time_basis_lines, why_no_range
from gpuwise.runtime.accuracy import MIN_CASES, REGIMES, load_accuracy
from gpuwise.runtime.predict import multi_gpu_regime

ESTIMATE_ON_4 = ["estimate", "torchvision:resnet18", "--batch-size", "64", "--num-gpus", "4",
                 "--gpu", "a100-80gb-sxm4", "--json"]
MULTI = {"cases": 40, "median_abs_error": 0.2, "p90_abs_error": 0.5, "signed_median_error": -0.1,
         "ratio_q10": 0.6, "ratio_q90": 1.2}


def _shipped(**extra) -> dict:
    """The shipped figures without any multi-GPU regime, plus ``extra`` regimes' entries."""
    shipped = {r: a.to_dict() for r, a in accuracy.load_accuracies().items() if not r.startswith("multi-")}
    return accuracy.accuracies_from({"regimes": {**shipped, **extra}})


def _option(regime: str) -> SimpleNamespace:
    return SimpleNamespace(fits=True, total_time_s=3600.0, calibration=None, bound="compute", regime=regime)


def test_a_training_step_on_several_gpus_names_what_kind_of_multi_gpu_step_it_is():
    assert multi_gpu_regime("ddp", 8, 8) == "multi-gpu"                 # what Lambda's runs measure
    assert multi_gpu_regime("zero3", 4, 8) == "multi-gpu-sharded"       # weights gathered: no held-out run
    assert multi_gpu_regime("fsdp", 8, 8) == "multi-gpu-sharded"
    assert multi_gpu_regime("ddp", 16, 8) == "multi-node"               # over the network: no held-out run
    assert {"multi-gpu", "multi-gpu-sharded", "multi-node"} <= set(REGIMES)


@pytest.mark.parametrize("extra, regime", [([], "multi-gpu"), (["--sharding", "zero3"], "multi-gpu-sharded")])
def test_estimate_names_the_regime_and_a_sharded_step_never_borrows_the_ddp_range(cli_json, monkeypatch, extra,
                                                                                  regime):
    figures = _shipped(**{"multi-gpu": MULTI})
    monkeypatch.setattr(accuracy, "load_accuracies", lambda: figures)
    out = cli_json([*ESTIMATE_ON_4, *extra])
    step_s = out["time"]["step_time_s"]
    assert out["time"]["regime"] == regime
    if regime == "multi-gpu":
        assert out["time"]["likely_step_time_range_s"] == pytest.approx([step_s / 1.2, step_s / 0.6])
        assert out["time"]["likely_range_note"] is None and out["time_accuracy"]["regime"] == "multi-gpu"
    else:
        assert out["time"]["likely_step_time_range_s"] is None
        assert out["time"]["likely_range_note"] == ("no held-out run measures this (a sharded (ZeRO / FSDP) "
                                                    "training step on several GPUs of one node)")


def test_inference_on_several_gpus_is_replicas_of_one_gpu_s_step_and_keeps_its_regime(cli_json):
    out = cli_json([*ESTIMATE_ON_4, "--mode", "infer"])
    assert out["time"]["regime"] not in ("multi-gpu", "multi-gpu-sharded", "multi-node")


def test_without_multi_gpu_figures_the_step_says_no_run_measures_it_not_the_single_gpu_range(cli_json, monkeypatch):
    figures = _shipped()
    monkeypatch.setattr(accuracy, "load_accuracies", lambda: figures)
    monkeypatch.setattr(plan_accuracy, "held_out_cases", lambda regime: 0)
    out = cli_json(ESTIMATE_ON_4)
    assert out["time"]["regime"] == "multi-gpu" and out["time"]["likely_step_time_range_s"] is None
    assert out["time"]["likely_range_note"] == ("no held-out run measures this (a data-parallel (DDP) training step "
                                                "on several GPUs of one node)")


def test_a_mixed_table_gives_each_regime_its_own_line(monkeypatch):
    figures = _shipped(**{"multi-gpu": MULTI})
    monkeypatch.setattr(accuracy, "load_accuracies", lambda: figures)
    single = load_accuracy("large-batch")
    lines = time_basis_lines([_option("multi-gpu"), _option("large-batch"), _option("multi-node")], "traced")
    assert len(lines) == 3
    multi_line = next(x for x in lines if "data-parallel (DDP)" in x)
    assert "of the 1 option of a data-parallel (DDP) training step" in multi_line
    assert "took 0.83-1.67x the predicted time" in multi_line        # 1 / 1.2 and 1 / 0.6: its own figures
    single_line = next(x for x in lines if "single-GPU eager step" in x)
    assert f"took {single.likely_range_s(1.0)[0]:.2f}-{single.likely_range_s(1.0)[1]:.2f}x" in single_line
    node_line = next(x for x in lines if "over several nodes" in x)
    assert node_line.endswith(": no held-out run measures this.") and "x the predicted time" not in node_line


def test_a_compiled_training_step_is_a_regime_no_held_out_run_measures():
    # timm's -dynamo rows are inference: a compiled training step does not borrow their range
    assert why_no_range("compiled-train") == "no held-out run measures this (a torch.compile training step)"


def test_a_regime_with_too_few_scored_runs_says_how_many(monkeypatch):
    figures = _shipped()
    monkeypatch.setattr(accuracy, "load_accuracies", lambda: figures)
    monkeypatch.setattr(plan_accuracy, "held_out_cases", lambda regime: 4 if regime == "multi-gpu" else 0)
    assert time_basis_lines([_option("multi-gpu")], "traced") == [
        f"Times and costs: only 4 held-out runs of a data-parallel (DDP) training step on several GPUs of one node "
        f"scored, fewer than the {MIN_CASES} a range needs."]


def test_a_regime_nothing_measures_keeps_its_words():
    assert why_no_range("small-batch").startswith("no held-out run measures this (a small-batch step")
    assert why_no_range("rnn", named=False) == "no held-out run measures this"


@pytest.mark.parametrize("extra, regime", [(["--batch-size", "2"], "small-batch"), (["--compile"], "compiled-train")])
def test_a_step_that_is_not_big_batch_eager_on_one_gpu_keeps_its_own_regime_on_several(cli_json, extra, regime):
    # Lambda's multi-GPU runs are big-batch eager DDP: a launch-bound or compiled step on 4 GPUs took "multi-gpu"
    # (and would have printed their range) while on one GPU it has its own, with no range
    one = cli_json([*ESTIMATE_ON_4[:-5], "--num-gpus", "1", *ESTIMATE_ON_4[-3:], *extra])
    four = cli_json([*ESTIMATE_ON_4, *extra])
    assert one["time"]["regime"] == four["time"]["regime"] == regime
