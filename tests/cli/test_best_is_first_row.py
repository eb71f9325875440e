"""The options' order and the BEST marker follow one rule: on a cost tie the faster option is the best, and the best
is the first row. A new user's trial: serving at 10 requests/s on RunPod, 2× RTX A5000 and 1× RTX A5000 both cost
$1.62 an hour; BEST marked the second row (the faster) while the first row (the slower) was unmarked."""

from __future__ import annotations

SERVING = ["recommend", "hf:meta-llama/Llama-3.1-8B", "--mode", "infer", "--seq-len", "1024", "--max-new-tokens",
           "256", "--request-rate", "10", "--ttft", "2s", "--tpot", "50ms", "--provider", "runpod"]


def _key(o: dict) -> tuple:
    return o["gpu"], o["count"], o["provider"], o["spot"]


def test_on_a_cost_tie_the_best_is_the_first_row_and_the_faster(cli_json, cli_run):
    out = cli_json([*SERVING, "--json"])
    first, best = out["options"][0], out["best"]
    assert _key(first) == _key(best)
    tied = [o for o in out["options"] if o["excluded_because"] is None
            and o["total_cost_ranked"] == best["total_cost_ranked"]]
    assert len(tied) >= 2     # the trial's tie is still there to order

    def request_s(o):
        return o["ttft_s"] + 256 * o["tpot_s"]

    assert [request_s(o) for o in tied] == sorted(request_s(o) for o in tied)
    code, text, err = cli_run(*SERVING)
    assert code == 0, err
    rows = [line for line in text.splitlines() if "runpod" in line and "$" in line]
    assert rows[0].lstrip().startswith("BEST"), rows[:3]
    assert not any("BEST" in row for row in rows[1:])
