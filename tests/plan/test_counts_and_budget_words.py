"""What recommend says where offers exist only at counts it does not quote, and how it says a budget missed.

A new user's trial: `recommend torchvision:resnet18 --provider lambda --gpus a100-80gb-sxm4 --max-gpus 4` said "no GPU on
offer has bf16 (), which fp32 needs" (an fp32 run, an A100 with bf16): Lambda rents that GPU 8 at a time, so there
was no option, and the bf16 rule fired over an empty list. An own offer with `count = 16` or `count = 3` was never used
and nothing said so. A ¥ budget missed by $0.0025 read "over budget by $0.00"; a bare `--budget 0.2` was $ at one
provider and ¥ without one, said nowhere.
"""

from __future__ import annotations

import re

import pytest

from gpuwise.plan import Constraints, JobSize, recommend
from gpuwise.units import CNY_PER_UNIT
from gpuwise.workload import Workload
from tests.plan.test_recommend import ScriptedModel, catalog, offer, small_catalog  # noqa: F401 (catalog: a fixture)


def _model():
    return ScriptedModel(Workload("scripted", batch_size=8, precision="fp32"))


def test_offers_only_above_max_gpus_say_who_rents_how_many_not_bf16(catalog):
    cat = small_catalog(catalog, {"a100-80gb-sxm4"}, [offer("a100-80gb-sxm4", 14.32, "USD", count=8, provider="lambda")])
    rec = recommend(_model(), cat, job=JobSize(steps=100), provider="lambda", gpu_ids=["a100-80gb-sxm4"], max_gpus=4)
    assert rec.best is None and not rec.options
    assert "bf16" not in rec.nothing_meets
    assert "no offer at 1, 2 or 4 GPUs" in rec.nothing_reason
    assert "lambda rents a100-80gb-sxm4 8 at a time" in rec.nothing_reason and "--max-gpus to 8" in rec.nothing_reason
    # with --max-gpus 8 the same offer is an option
    assert recommend(_model(), cat, job=JobSize(steps=100), max_gpus=8).best.count == 8


@pytest.mark.parametrize("count", [3, 16])
def test_an_offer_for_a_count_recommend_does_not_quote_is_said(catalog, count):
    cat = small_catalog(catalog, {"a100-80gb-sxm4"}, [
        offer("a100-80gb-sxm4", 20.0, count=count, provider="lab"), offer("a100-80gb-sxm4", 6.0)])
    rec = recommend(_model(), cat, job=JobSize(steps=100))
    assert {o.count for o in rec.options}.isdisjoint({count})
    said = [n for n in rec.notes if n.startswith("not quoted:")]
    assert len(said) == 1 and f"lab's {count}x a100-80gb-sxm4" in said[0]
    alone = small_catalog(catalog, {"a100-80gb-sxm4"}, [offer("a100-80gb-sxm4", 20.0, count=count, provider="lab")])
    nothing = recommend(_model(), alone, job=JobSize(steps=100)).nothing_reason
    assert f"lab rents a100-80gb-sxm4 {count} at a time" in nothing and "bf16" not in nothing


def test_a_budget_in_yuan_missed_by_a_fraction_of_a_cent_says_the_excess_in_dollars_and_yuan(catalog):
    cat = small_catalog(catalog, {"t4"}, [offer("t4", 0.40, "USD", provider="aws")])
    job = JobSize(steps=100)
    cost_usd = recommend(_model(), cat, job=job, max_gpus=1).best.total_cost_ranked
    over_usd = 0.0025
    budget_cny = (cost_usd - over_usd) * CNY_PER_UNIT["USD"]
    rec = recommend(_model(), cat, job=job, max_gpus=1,
                    constraints=Constraints(budget=budget_cny, budget_currency="CNY"))
    (option,) = rec.options
    # the ranking currency first, as the table's costs are, then the budget's
    said = re.search(r"over budget by \$([0-9.]+) \(¥([0-9.]+)\)", option.excluded_because)
    assert said, option.excluded_because
    assert float(said.group(1)) == pytest.approx(over_usd, rel=0.05)
    assert float(said.group(2)) == pytest.approx(over_usd * CNY_PER_UNIT["USD"], rel=0.05)


@pytest.mark.parametrize("currency", ["USD", "CNY"])
def test_a_bare_budget_says_the_currency_it_was_read_in(catalog, currency):
    cat = small_catalog(catalog, {"t4"}, [offer("t4", 0.40, currency, provider="aws")])
    rec = recommend(_model(), cat, job=JobSize(steps=100), max_gpus=1, constraints=Constraints(budget=0.2))
    said = [n for n in rec.notes if n.startswith("budget ")]
    assert len(said) == 1 and f"in the ranking currency, {currency} here" in said[0]
    given = recommend(_model(), cat, job=JobSize(steps=100), max_gpus=1,
                      constraints=Constraints(budget=0.2, budget_currency=currency))
    assert not [n for n in given.notes if n.startswith("budget ")]
