"""A currency written before the amount (`--budget '£50'`, `USD50`, `USD 50`) reads as the same currency after it
does (`50GBP`, `50 USD`): `£50` and `USD50` were refused as "not an amount of money" although GBP is a ranking
currency and `$50` and `50 USD` worked. Nonsense is still refused, in one line."""

from __future__ import annotations

import statistics

import pytest

from gpuwise.plan.money import convert, parse_price
from gpuwise.units import UnitError

QWEN_LORA = ["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "512", "--steps", "2000",
             "--no-remedies", "--json"]


@pytest.mark.parametrize("before, after", [("£50", "50 GBP"), ("£ 50", "50GBP"), ("USD50", "50 USD"),
                                           ("USD 50", "50USD"), ("usd 50", "50 usd"), ("GBP 2.5", "2.5 GBP"),
                                           ("RMB300", "300 RMB"), ("JPY 5000", "5000JPY"), ("$50 USD", "$50")])
def test_a_currency_before_the_amount_reads_as_after_it(before, after):
    assert parse_price(before) == parse_price(after)


@pytest.mark.parametrize("text, said", [("£", "not an amount of money"), ("50£", "not an amount of money"),
                                        ("USD$50", "not an amount of money"), ("US50", "not an amount of money"),
                                        ("$50EUR", "names two currencies (EUR and USD)"),
                                        ("USD50GBP", "names two currencies (GBP and USD)"),
                                        ("-£5", "amount must be positive")])
def test_nonsense_money_is_refused_in_one_line(text, said):
    with pytest.raises(UnitError) as caught:
        parse_price(text)
    assert said in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("budget", ["XYZ50", "£50 EUR", "£"])
def test_recommend_refuses_a_budget_it_cannot_read_in_one_line(cli_run, budget):
    code, out, err = cli_run(*QWEN_LORA, "--budget", budget)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("gpuwise: error: --budget: ")


def test_recommend_takes_a_budget_in_pounds_written_first_as_written_after(cli_json):
    costs_cny = [o["total_cost_ranked"] for o in cli_json(QWEN_LORA)["options"] if o["total_cost_ranked"]]
    budget_gbp = round(convert(statistics.median(costs_cny), "CNY", "GBP"), 4)     # some options over it, some not
    answers = [cli_json([*QWEN_LORA, "--budget", written]) for written in
               (f"{budget_gbp} GBP", f"£{budget_gbp}", f"GBP {budget_gbp}", f"gbp{budget_gbp}")]
    assert all(answer == answers[0] for answer in answers[1:])
    reasons = [o["excluded_because"] or "" for o in answers[0]["options"] if o["total_cost_ranked"]]
    assert any(r.startswith("over budget") for r in reasons) and any(not r for r in reasons)
