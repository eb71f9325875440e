"""The 99th-percentile decode batch never exceeds the limit B (review finding): scipy's ``pdtri`` inverts the
Poisson CDF only to rounding, so ``1 + poisson_quantile(mean_within(B - 1))`` came out as B + 1 for 48 of the
limits B in 1..599 (``load_point`` at capacity said 16 sequences at the quantile for B = 15, 78 for B = 77)."""

from __future__ import annotations

from gpuwise.runtime.serving_load import (CONCURRENCY_QUANTILE, ServingCurve, capacity_per_s, load_point,
                                          mean_within, poisson_quantile)


def _curve(limit: int) -> ServingCurve:
    return ServingCurve(engine="vllm", new_tokens=256, batches=(1, limit), first_token_s=(0.05, 0.05),
                        decode_step_s=(0.03, 0.03 + 0.0005 * (limit - 1)), max_batch=limit)


def test_the_mean_within_a_limit_has_its_quantile_within_the_limit():
    for limit in range(0, 600):
        assert poisson_quantile(mean_within(limit, CONCURRENCY_QUANTILE), CONCURRENCY_QUANTILE) <= limit, limit


def test_the_decode_batch_at_the_quantile_never_exceeds_the_limit_at_capacity():
    for limit in range(2, 601):     # a limit of 1 is a static batch of 1 (no quantile)
        curve = _curve(limit)
        point = load_point(curve, capacity_per_s(curve))
        assert point.carried and point.decode_batch_at_quantile <= limit, limit
    assert load_point(_curve(15), capacity_per_s(_curve(15))).decode_batch_at_quantile == 15     # was 16
    assert load_point(_curve(77), capacity_per_s(_curve(77))).decode_batch_at_quantile == 77     # was 78
