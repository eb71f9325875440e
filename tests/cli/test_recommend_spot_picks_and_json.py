"""A new user's trial of recommend's named picks (Best, Fastest, Value, closest) against its table and --json.

Found in the trial:
- ``recommend torchvision:resnet50 ... --spot --provider runpod --gpus h100-sxm`` marked "runpod (spot)" in the
  table, but its Best line said "from runpod: 60.9 min (30.6 ms a step)", which reads as the on-demand H100 of
  the row below, and 30.6 ms × 117,210 steps is 59.8 min: the 74.6 s of expected preemptions went unsaid.
- ``--json``'s ``best``, ``fastest`` and ``best_value`` (and ``closest``) lacked the ``likely_time_range_s`` their
  own row in ``options`` has.
- ``--all``'s help promised "the 15 best"; the table shows 12.
- Where no option fits, the remedies were offered "To fit a cheaper GPU:", cheaper than no option at all.
"""

from __future__ import annotations

import inspect
import json
import re

from typer.testing import CliRunner

from gpuwise.cli import recommend as recommend_cli
from gpuwise.cli.app import app

SPOT_JOB = ["recommend", "torchvision:resnet18", "--precision", "amp-fp16", "--samples", "200000", "--epochs", "5",
            "--batch-size", "128", "--spot", "--provider", "runpod", "--gpus", "h100-sxm", "--max-gpus", "1"]


def _line(out: str, start: str) -> str:
    """The logical line that starts with ``start``, its wrapped continuation joined (the console is 80 wide)."""
    text = out.replace("\n", " ")
    at = text.index(start)
    return text[at:at + 300]


def test_a_spot_pick_says_spot_and_the_preemptions_its_time_includes(cli_run):
    code, out, err = cli_run(*SPOT_JOB, "--json")
    assert code == 0, err
    best = json.loads(out)["best"]
    assert best["spot"] and best["preemption_time_s"] > 0       # the spot H100 is the cheaper one here
    code, out, err = cli_run(*SPOT_JOB)
    assert code == 0, err
    line = _line(out, "Best:")
    assert line.startswith("Best: 1× NVIDIA H100 80GB SXM5 from runpod (spot):"), line
    assert "of it expected preemptions" in line, line
    fastest = _line(out, "Fastest")       # the on-demand H100 is the faster: no preemptions to wait out
    assert "from runpod:" in fastest and "(spot)" not in fastest.split(",")[0], fastest


def test_json_picks_carry_the_likely_range_of_their_row(cli_run):
    code, out, err = cli_run(*SPOT_JOB, "--json")
    assert code == 0, err
    answer = json.loads(out)
    rows = {(o["gpu"], o["count"], o["provider"], o["spot"]): o for o in answer["options"]}
    for key in ("best", "fastest", "best_value"):
        pick = answer[key]
        row = rows[(pick["gpu"], pick["count"], pick["provider"], pick["spot"])]
        assert "likely_time_range_s" in pick, key
        assert pick == row, key


def test_the_all_help_names_the_rows_the_table_shows():
    result = CliRunner().invoke(app, ["recommend", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    said = re.search(r"not the (\d+) best", " ".join(result.output.split()))
    shown = inspect.signature(recommend_cli._summary).parameters["limit"].default
    assert said and int(said.group(1)) == shown, said


def test_remedies_where_nothing_fits_are_not_said_to_be_cheaper(cli_run):
    code, out, err = cli_run("recommend", "hf:Qwen/Qwen2.5-7B", "--precision", "bf16", "--seq-len", "2048",
                             "--batch-size", "4", "--samples", "20000", "--gpus", "a100-80gb-sxm4",
                             "--provider", "autodl", "--max-gpus", "2")
    assert code == 0, err
    assert "nothing meets the request" in out
    assert "To make the job fit:" in out and "To fit a cheaper GPU" not in out
