"""recommend's "at risk" line (the prediction meets --deadline, the slow end of its likely range does not) has its
--json field: each option's ``deadline_at_risk_s``, the slow end's job time, null where nothing is at risk. Was: the
text said "at the slow end of the likely range it would take 30.9 h, past the 24.0 h deadline" and --json nothing."""

from __future__ import annotations

JOB = ["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "full", "--precision", "amp-bf16", "--seq-len", "512",
       "-b", "4", "--steps", "100000", "--gpus", "rtx-4090,a100-80gb-sxm4", "--max-gpus", "1"]


def _expected_at_risk_s(option: dict, deadline_s: float) -> float | None:
    likely = option["likely_time_range_s"]
    meets = option["total_time_s"] is not None and option["total_time_s"] <= deadline_s
    return likely[1] if meets and likely and likely[1] > deadline_s else None


def test_each_option_says_the_slow_end_past_a_deadline_its_prediction_meets(cli_json, cli_run):
    free = cli_json([*JOB, "--json"])
    ranged = [o for o in free["options"] if o["likely_time_range_s"]]
    assert len(ranged) >= 2, free["options"]
    slowest = max(ranged, key=lambda o: o["total_time_s"])
    deadline_s = round((slowest["total_time_s"] + slowest["likely_time_range_s"][1]) / 2)   # between the two
    argv = [*JOB, "--deadline", f"{deadline_s}s"]
    answer = cli_json([*argv, "--json"])
    said = {(o["gpu"], o["provider"]): o["deadline_at_risk_s"] for o in answer["options"]}
    assert said == {(o["gpu"], o["provider"]): _expected_at_risk_s(o, deadline_s) for o in answer["options"]}
    assert said[(slowest["gpu"], slowest["provider"])] == slowest["likely_time_range_s"][1]
    assert None in said.values()          # an option whose slow end is within the deadline is not at risk
    best = answer["best"]
    assert best["deadline_at_risk_s"] == said[(best["gpu"], best["provider"])]
    code, out, err = cli_run(*argv)
    assert code == 0, err
    assert ("at risk:" in out) == (best["deadline_at_risk_s"] is not None)
