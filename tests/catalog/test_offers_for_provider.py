"""The library's offers_for answered [] for a misspelt provider ('autodll'), where the CLI's --provider says the
provider is unknown: a typo is not "no offers". One rule (catalog.resolve.known_provider) for both."""

from __future__ import annotations

import pytest

from gpuwise.catalog import CatalogError, load_catalog, offers_for


def test_a_misspelt_provider_is_an_error_with_the_closest_known_one():
    cat = load_catalog(user_file=False)
    with pytest.raises(CatalogError, match=r"unknown provider 'autodll' \(did you mean: autodl\?\); known: "):
        offers_for(cat, "rtx-4090", provider="autodll")


def test_a_known_provider_in_any_case_finds_its_offers():
    cat = load_catalog(user_file=False)
    assert offers_for(cat, "rtx-4090", provider="AutoDL") == offers_for(cat, "rtx-4090", provider="autodl") != []
    assert all(o.provider.lower() == "autodl" for o in offers_for(cat, "rtx-4090", provider=" AUTODL "))
