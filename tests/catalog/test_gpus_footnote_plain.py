"""The lines under `gpuwise gpus`' tables answer what a newcomer asks, one plain sentence each: what "dense" peak
means, what the "from" price is, where the shipped prices come from and when they were checked, and what a
marketplace's price is. Before, the footnote said "Dense peak TFLOPS" unexplained, gave no date for the prices and
said nothing of marketplaces."""

from __future__ import annotations

from typer.testing import CliRunner

from gpuwise.catalog import builtin_catalog
from gpuwise.catalog.topology import rents_per_gpu
from gpuwise.cli.app import app

CATALOG = builtin_catalog()


def footnote_of(*args: str) -> str:
    result = CliRunner().invoke(app, ["gpus", *args])
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())       # the console wraps lines


def test_the_footnote_says_dense_means_without_sparsity():
    assert "2:4 sparsity" in footnote_of("t4")


def test_the_footnote_dates_the_shipped_prices_it_shows():
    said = footnote_of("--provider", "gcp")
    (checked,) = {o.checked for o in CATALOG.offers if o.provider == "gcp"}
    assert f"checked {checked}" in said
    dates = sorted({o.checked for o in CATALOG.offers})
    assert f"checked {dates[0]} to {dates[-1]}" in footnote_of()


def test_a_marketplace_price_is_explained_only_where_a_marketplace_is_shown():
    marketplaces = sorted({o.provider for o in CATALOG.offers if rents_per_gpu(o.provider)})
    assert marketplaces
    assert "price per card" in footnote_of("--provider", marketplaces[0])
    assert "marketplace" not in footnote_of("--provider", "gcp")


def test_the_from_column_is_said_to_be_one_gpu_alone():
    assert "from /GPU-h: the cheapest on-demand price to rent one GPU alone" in footnote_of()


def test_the_hint_to_name_gpus_is_left_out_where_gpus_were_named():
    """A review's finding: "name GPUs to see every offer" was printed under a table of named GPUs."""
    assert "name GPUs to see" in footnote_of()
    assert "name GPUs to see" not in footnote_of("a100-40gb-sxm4", "--provider", "gcp")


def test_the_hint_is_left_out_where_a_provider_lists_its_offers():
    """A second review's finding: `gpus --provider aws` lists every offer with its region, then said to name GPUs."""
    assert "name GPUs to see" not in footnote_of("--provider", "aws")
