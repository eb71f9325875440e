"""A spot task keeps ``infra: cloud/region``, the region whose prices the plan is quoted at (the catalog's AWS
prices are us-east-1's), and says in a comment that this binds a managed job's recovery to that region and that
``infra: cloud`` alone lets it use the others, at their prices. Before, the region was pinned without a word."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from gpuwise.catalog.topology import provider_entry
from gpuwise.launch import plan_launch, render


def _task_text(cat, *, spot: bool) -> str:
    plan = plan_launch(SimpleNamespace(count=1, provider="aws", spot=spot), cat.gpu("l4"), "python train.py")
    return render(plan, "skypilot")


def _parsed(sky, tmp_path, text: str):
    path = tmp_path / "task.yaml"
    path.write_text(text)
    (resources,) = sky.Task.from_yaml(str(path)).resources
    return resources


def test_a_spot_task_keeps_the_priced_region_and_says_how_to_widen_it(sky, tmp_path, cat):
    text = _task_text(cat, spot=True)
    region = provider_entry("aws")["region"]
    resources = _parsed(sky, tmp_path, text)
    assert resources.use_spot and resources.region == region
    (note,) = [line for line in text.splitlines() if line.startswith("# note: infra:")]
    assert f"infra: aws/{region}" in note and "infra: aws lets" in note and "other regions" in note


def test_the_widened_infra_the_note_names_is_a_task_skypilot_takes(sky, tmp_path, cat):
    region = provider_entry("aws")["region"]
    text = _task_text(cat, spot=True).replace(f"infra: aws/{region}\n", "infra: aws\n")
    resources = _parsed(sky, tmp_path, text)
    assert resources.region is None and str(resources.cloud).lower() == "aws"


def test_an_on_demand_task_has_no_recovery_to_speak_of(cat):
    assert "# note: infra:" not in _task_text(cat, spot=False)


def test_a_price_of_another_region_launches_in_that_region(sky, tmp_path, cat):
    """A user's (or a live) price of eu-west-1 was launched in the catalog's us-east-1, at other prices."""
    offer = replace(cat.offers_for("l4", provider="aws")[0], region="eu-west-1")
    option = SimpleNamespace(count=1, provider="aws", spot=True, offer=offer)
    text = render(plan_launch(option, cat.gpu("l4"), "python train.py"), "skypilot")
    assert _parsed(sky, tmp_path, text).region == "eu-west-1"
    assert "infra: aws/eu-west-1" in text


def test_an_offer_naming_no_region_launches_in_the_providers(cat):
    offer = replace(cat.offers_for("l4", provider="aws")[0], region="")
    plan = plan_launch(SimpleNamespace(count=1, provider="aws", spot=False, offer=offer), cat.gpu("l4"), "python x.py")
    assert plan.region == provider_entry("aws")["region"]
