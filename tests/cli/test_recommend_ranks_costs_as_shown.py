"""recommend's BEST, on the trial's job: ResNet-50 inference over 10M images on RunPod within 1 h. Every count of
an RTX A5000 costs $0.26 (inference splits without communication), so the best is the fastest of them, not the
one GPU that a thousandth of a cent made cheaper and that the likely range puts at risk of missing the deadline."""

from __future__ import annotations

JOB = ["recommend", "torchvision:resnet50", "--mode", "infer", "--batch-size", "256", "--precision", "amp-fp16",
       "--samples", "10000000", "--deadline", "1h", "--provider", "runpod", "--gpus", "rtx-a5000"]


def test_the_best_of_options_that_cost_the_same_to_the_cent_is_the_fastest(cli_json, cli_run):
    out = cli_json([*JOB, "--json"])
    best = out["best"]
    shown = f"{best['total_cost_ranked']:.2f}"
    tied = [o for o in out["options"] if o["excluded_because"] is None and f"{o['total_cost_ranked']:.2f}" == shown]
    assert len(tied) >= 2, "the trial's tie is gone: nothing left to order"
    assert best["total_time_s"] == min(o["total_time_s"] for o in tied)
    assert best["count"] > 1
    code, text, err = cli_run(*JOB)
    assert code == 0, err
    rows = [line for line in text.splitlines() if "runpod" in line and "$" in line]
    assert rows[0].lstrip().startswith("BEST") and f"×{best['count']}" in rows[0], rows[:3]


def test_a_list_of_providers_is_refused_in_one_line_saying_to_leave_it_out(cli_run):
    code, out, err = cli_run("recommend", "hf:bert-base-uncased", "--seq-len", "128", "--batch-size", "32",
                             "--samples", "1000", "--provider", "runpod,aws")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "one provider, not a list" in err and "'runpod,aws'" in err
    assert "did you mean" not in err
