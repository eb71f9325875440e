"""recommend finds a provider as `gpus` does: by an alias (gpuhunt's "lambdalabs"), and a cloud the topology data
knows without offers (Azure) is told where prices come from, not called unknown."""

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.errors import PlanError
from gpuwise.plan.offers import candidate_offers, check_provider


def test_an_alias_finds_its_providers_offers():
    cat = load_catalog()
    lambda_offers = candidate_offers(cat, provider="lambda")
    assert lambda_offers
    assert candidate_offers(cat, provider="lambdalabs") == lambda_offers


def test_a_known_cloud_without_offers_is_told_where_prices_come_from():
    with pytest.raises(PlanError, match=r"^--provider: no offer from azure in the catalog: add --live"):
        check_provider(load_catalog(), "azure")


def test_a_name_nobody_knows_is_still_unknown():
    with pytest.raises(PlanError, match=r"^--provider: unknown provider 'nosuchcloud'"):
        check_provider(load_catalog(), "nosuchcloud")
