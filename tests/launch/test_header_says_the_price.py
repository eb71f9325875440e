"""The emitted launch says what recommend priced it at: ``--emit`` prints the launch instead of the table, so its
header is all a user sees before spending; it said the GPUs and the provider, not the time or the cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from gpuwise.launch import plan_launch, render
from gpuwise.units import format_duration, format_money, format_request_rate

REPO = Path(__file__).resolve().parents[2]
TRAIN = ("hf:Qwen/Qwen2.5-0.5B", "--seq-len", "512", "--steps", "1000", "--gpus", "rtx-4090")
SERVE = ("hf:Qwen/Qwen2.5-7B", "--mode", "infer", "--engine", "vllm", "--request-rate", "30", "--max-new-tokens",
         "256", "--seq-len", "1024", "--provider", "runpod")


def _recommend(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", *args, "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _header(text: str) -> list[str]:
    return text[:text.index("\n# note:")].splitlines()


def test_torchrun_and_skypilot_headers_say_the_best_options_time_and_cost():
    for provider, emit in (("autodl", "torchrun"), ("runpod", "skypilot")):
        answer = _recommend(*TRAIN, "--provider", provider, "--emit", emit, "--command", "python train.py")
        best = answer["best"]
        said = f"{format_duration(best['total_time_s'])}, {format_money(best['total_cost_ranked'], best['ranking_currency'])}"
        assert f"# priced: {said} " in _header(answer["launch"]["text"])[1]


def test_a_servers_service_says_its_cost_an_hour_for_its_replicas_at_the_rate():
    answer = _recommend(*SERVE, "--emit", "skypilot")
    best = answer["best"]
    assert best["replicas"] > 1
    said = (f"{format_money(best['total_cost_ranked'], best['ranking_currency'])} an hour for {best['replicas']} "
            f"replicas at {format_request_rate(30)}")
    assert f"# priced: {said} " in _header(answer["launch"]["text"])[1]


def test_an_option_without_a_price_gets_no_price_line(cat):
    plan = plan_launch(SimpleNamespace(count=2, provider="autodl", spot=False), cat.gpu("rtx-4090"), "python t.py")
    assert "# priced:" not in render(plan, "torchrun")
