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
    argv = ["estimate", "torchvision:resnet18", "--gpu", "a100-80gb-sxm4", "--batch-size", "128"]
    out = cli_json([*argv, "--json"])
    assert out["time"]["regime"] == "large-batch"
    step = out["time"]["step_time_s"]
    lo, hi = out["time"]["likely_step_time_range_s"]
    assert lo < step < hi
    assert out["time_accuracy"]["cases"] == load_accuracy().cases
    text = _text(argv, capsys)
    assert "likely " in text and "held-out public runs" in text


def test_recommend_says_how_far_times_and_costs_may_be(cli_json, capsys):
    argv = ["recommend", "torchvision:resnet18", "--batch-size", "128", "--samples", "10000", "--gpus", "t4,a10"]
    out = cli_json([*argv, "--json"])
    assert out["time_accuracy"]["ratio_q10"] == load_accuracy().ratio_q10
    assert all(o["likely_time_range_s"] is None or o["likely_time_range_s"][0] < o["total_time_s"]
               for o in out["options"])
    assert "held-out public runs took" in " ".join(_text(argv, capsys).split())


def test_no_range_where_no_held_out_run_measures_the_error(cli_json, capsys):
    # the 140 held-out runs are traced CNN/transformer jobs: the LLM closed form gets no borrowed range
    llm = ["hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "1024", "--batch-size", "4",
           "--precision", "bf16", "--gpu", "a100-80gb-sxm4"]
    out = cli_json(["estimate", *llm, "--json"])
    assert out["method"] == "closed-form" and out["time"]["step_time_s"] > 0
    assert out["time"]["likely_step_time_range_s"] is None
    assert "likely " not in _text(["estimate", *llm], capsys)
    # nor a step the user's input rate sets (the key is there, null)
    fed = cli_json(["estimate", "torchvision:resnet18", "--gpu", "a100-80gb-sxm4", "--batch-size", "8",
                    "--input-rate", "10", "--json"])
    assert fed["time"]["bound"] == "input" and fed["time"]["likely_step_time_range_s"] is None


def test_recommend_says_when_the_deadline_is_met_only_by_the_prediction(cli_json, capsys):
    base = ["recommend", "torchvision:resnet18", "--batch-size", "32", "--samples", "200000", "--gpus", "t4",
            "--max-gpus", "1"]
    best_s = cli_json([*base, "--json"])["best"]["total_time_s"]
    _, slow = load_accuracy().likely_range_s(best_s)
    tight = _text([*base, "--deadline", f"{best_s * 1.05:.0f}s"], capsys)
    assert "at risk:" in tight and "past the" in tight
    roomy = _text([*base, "--deadline", f"{slow * 1.1:.0f}s"], capsys)
    assert "Best:" in roomy and "at risk:" not in roomy


def test_recommend_shows_the_decoding_cores_the_pick_needs(cli_json, capsys):
    argv = ["recommend", "torchvision:resnet50", "--batch-size", "256", "--precision", "amp-bf16", "--samples",
            "100000", "--gpus", "h100-sxm", "--max-gpus", "1"]
    best = cli_json([*argv, "--json"])["best"]
    assert any("CPU cores of decoding" in w for w in best["warnings"])
    text = _text(argv, capsys)
    assert "CPU cores of" in text
    # one option is every pick: one mark in the row, the others said in words (not as empty rows)
    assert "also the fastest and the best value" in text


def test_every_gpu_row_and_the_job_time_carry_the_range(cli_json, capsys):
    rows = cli_json(["estimate", "torchvision:resnet18", "--batch-size", "128", "--gpu", "all", "--json"])["per_gpu"]
    rows = [r for r in rows if r["step_time_s"]]
    big = [r for r in rows if r["regime"] == "large-batch"]
    assert len(big) > len(rows) / 2
    for row in rows:
        if row["regime"] != "large-batch":     # the fastest GPUs wait for the host: no big-batch range
            assert row["likely_step_time_range_s"] is None
            continue
        lo, hi = row["likely_step_time_range_s"]
        assert lo < row["step_time_s"] < hi
    text = _text(["estimate", "torchvision:resnet18", "--batch-size", "128", "--gpu", "a10", "--samples", "8000"], capsys)
    job = next(line for line in text.splitlines() if "job " in line and "steps" in line)
    assert ", likely " in job


def test_recommend_applies_the_one_range_rule_to_the_llm_closed_form_and_input_bound_jobs(capsys):
    # the closed form has no held-out measurement: no "at risk" from the traced jobs' range (it said so before)
    llm = _text(["recommend", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "1024", "--batch-size", "4",
                 "--steps", "2000", "--gpus", "h800", "--max-gpus", "1", "--provider", "autodl", "--deadline", "1m"],
                capsys)
    assert "at risk" not in llm and "no held-out public runs" in llm and "0.74" not in llm
    fed = _text(["recommend", "torchvision:resnet18", "--batch-size", "32", "--samples", "20000", "--gpus", "a10",
                 "--max-gpus", "1", "--input-rate", "10", "--deadline", "1h"], capsys)
    assert "held-out public runs took" not in fed and "at risk" not in fed


def test_a_small_batch_step_gets_no_big_batch_range(cli_json, capsys, monkeypatch):
    """ResNet-50 at batch 1 on a V100 is a small-batch step: the host's launch cost shapes it and no held-out
    run measures that, so it is printed without the big-batch jobs' range (it said 3.2-6.6 ms where 10-13 ms
    were measured); once held-out small-batch runs exist, their own range is printed around it."""
    import gpuwise.runtime.accuracy as accuracy

    argv = ["estimate", "torchvision:resnet50", "--batch-size", "1", "--mode", "infer", "--gpu", "v100-16gb-sxm2"]
    out = cli_json([*argv, "--json"])
    assert out["time"]["regime"] == "small-batch"
    assert out["time"]["likely_step_time_range_s"] is None and out["time_accuracy"] is None
    assert out["time"]["likely_range_note"].startswith("no held-out run measures this")
    text = _text(argv, capsys)
    assert "no held-out run measures this" in text and "likely " not in text
    # the same figures with a small-batch regime measured (wider than the big-batch one)
    small = {"cases": 12, "median_abs_error": 0.3, "p90_abs_error": 0.6, "signed_median_error": -0.3,
             "ratio_q10": 0.35, "ratio_q90": 1.1}
    with_small = accuracy.accuracies_from({"date": "2026-12-03", "source": "held out", "regimes": {
        "large-batch": load_accuracy().to_dict(), "small-batch": small}})
    monkeypatch.setattr(accuracy, "load_accuracies", lambda: with_small)
    out = cli_json([*argv, "--json"])
    step = out["time"]["step_time_s"]
    lo, hi = out["time"]["likely_step_time_range_s"]
    assert (lo, hi) == pytest.approx((step / 1.1, step / 0.35))
    assert out["time_accuracy"]["regime"] == "small-batch" and out["time"]["likely_range_note"] is None


def test_the_old_flat_file_is_read_as_the_big_batch_regime():
    flat = {"cases": 140, "median_abs_error": 0.2, "p90_abs_error": 0.4, "signed_median_error": -0.06,
            "ratio_q10": 0.66, "ratio_q90": 1.35, "date": "2026-12-03", "source": "held out"}
    from gpuwise.runtime.accuracy import accuracies_from

    got = accuracies_from(flat)
    assert list(got) == ["large-batch"] and got["large-batch"].cases == 140
    assert accuracies_from({"regimes": {"compiled": {"cases": 3, **{k: flat[k] for k in flat if k != "cases"}}}}) == {}


def test_docs_runtime_quotes_the_shipped_figures():
    # the page said "median error 18%, signed median -6%" after the file had moved to 17.3% and -10%
    import re
    from pathlib import Path

    acc = load_accuracy()
    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text().split())
    runs, median, signed = re.search(r"\((\d+) runs: median error (\d+)%, signed median (-?\d+)%", text).groups()
    assert (int(runs), int(median), int(signed)) == (acc.cases, round(acc.median_abs_error * 100),
                                                     round(acc.signed_median_error * 100))
    low, high = acc.likely_range_s(1.0)
    assert f"({low:.2f}-{high:.2f}x)" in text       # as recommend says it


def test_a_multi_gpu_option_never_borrows_the_single_gpu_range(monkeypatch):
    """A new user's 8x V100 pick (a multi-GPU step) was followed by "8 in 10 held-out public runs took 0.77-1.42x":
    the footer took the first option with a range. Each regime now gets its own line (tests/plan/test_multi_gpu_range.py:
    the multi-GPU regime's own figures)."""
    from types import SimpleNamespace

    import gpuwise.plan.accuracy as plan_accuracy
    import gpuwise.runtime.accuracy as accuracy
    from gpuwise.plan.accuracy import time_basis_lines

    single_only = {r: a for r, a in accuracy.load_accuracies().items() if not r.startswith("multi-")}
    monkeypatch.setattr(accuracy, "load_accuracies", lambda: single_only)
    monkeypatch.setattr(plan_accuracy, "held_out_cases", lambda regime: 0)

    def option(regime):
        return SimpleNamespace(fits=True, total_time_s=3600.0, calibration=None, bound="compute", regime=regime)

    single = load_accuracy("large-batch")
    mixed = time_basis_lines([option("multi-gpu"), option("large-batch"), option("multi-gpu")], "traced")
    assert len(mixed) == 2
    assert mixed[0] == ("Times and costs of the 2 options of a data-parallel (DDP) training step on several GPUs of "
                        "one node: no held-out run measures this.")
    assert "of the 1 option of a single-GPU eager step: 8 in 10" in mixed[1]
    assert f"{single.likely_range_s(1.0)[0]:.2f}" in mixed[1]
    only = time_basis_lines([option("large-batch")], "traced")
    assert only == [only[0]] and only[0].startswith("Times and costs: 8 in 10 held-out public runs took")
    assert time_basis_lines([option("multi-gpu")], "traced") == [
        "Times and costs: no held-out run measures this (a data-parallel (DDP) training step on several GPUs of one "
        "node)."]


def test_docs_runtime_names_the_regimes_the_shipped_file_has_ranges_for():
    # the multi-GPU range was documented a session before the file had one (time_accuracy.json not rewritten)
    import re
    from pathlib import Path

    from gpuwise.runtime.accuracy import load_accuracies

    text = " ".join((Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text().split())
    said = text[text.index("Today `large-batch`"):]
    said = said[:said.index("have held-out runs")]
    assert set(re.findall(r"`([a-z-]+)` \(", said)) == set(load_accuracies())
