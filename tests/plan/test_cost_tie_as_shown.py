"""Options are ranked by their cost as it reads: costs that read the same, to the cent, are a tie that the faster
option wins. A new user's trial: ResNet-50 inference over 10M images on RunPod, 1× RTX A5000 at 58.2 min and 8× at
7.3 min both cost $0.26 (the 8× a thousandth of a cent more, from how its last, short batch rounds its steps), and
BEST was the 1×, at risk of missing the 1 h deadline, not the 8× that finishes in an eighth of the time."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.catalog.model import Offer
from gpuwise.catalog.resolve import resolve_gpu
from gpuwise.plan.quote import make_quote
from gpuwise.plan.recommend import rank_key


@pytest.fixture(scope="module")
def a5000():
    return resolve_gpu(load_catalog(user_file=False), "rtx-a5000")


def _quote(gpu, count: int, price_per_hour: float, total_time_s: float):
    offer = Offer("runpod", gpu.id, count, price_per_hour, "USD", False, "test", "2026-11-20")
    return make_quote(gpu, count, offer, peak_total_bytes=2 * 2**30, step_time_s=0.0893, headroom_fraction=0.05,
                      ranking_currency="USD", total_time_s=total_time_s)


def _ranked(quotes):
    return sorted(quotes, key=lambda q: rank_key(q, q.total_time_s))


def test_costs_that_read_the_same_rank_the_faster_first(a5000):
    # the trial's figures: $0.27/h a GPU; the 8× job a few samples longer (its steps rounded up)
    one = _quote(a5000, 1, 0.27, 3489.82)
    eight = _quote(a5000, 8, 2.16, 436.24)
    assert one.total_cost_ranked < eight.total_cost_ranked     # cheaper by less than a cent: the tie at issue
    assert round(one.total_cost_ranked, 2) == round(eight.total_cost_ranked, 2)
    assert _ranked([one, eight])[0] is eight


def test_a_cost_a_cent_lower_still_ranks_first_however_slow(a5000):
    slow = _quote(a5000, 1, 0.27, 3489.82)            # $0.26
    fast = _quote(a5000, 8, 2.16 * 1.05, 436.24)      # $0.27: reads dearer
    assert f"{slow.total_cost_ranked:.2f}" != f"{fast.total_cost_ranked:.2f}"
    assert _ranked([fast, slow])[0] is slow


def test_sub_cent_costs_that_all_read_nothing_are_still_ranked_by_cost(a5000):
    """A short inference job: 73 of 120 options read ¥0.00, and the best was the fastest of them (¥0.00077), not the
    cheapest (¥0.00063): costs under half a cent keep three significant digits."""
    cheap_slow = _quote(a5000, 1, 0.27, 8.4)       # $0.00063
    dear_fast = _quote(a5000, 8, 2.16, 1.28)       # $0.00077
    assert round(cheap_slow.total_cost_ranked, 2) == round(dear_fast.total_cost_ranked, 2) == 0
    assert _ranked([dear_fast, cheap_slow])[0] is cheap_slow
