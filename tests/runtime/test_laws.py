"""The tiled law's two paths: plain numbers (predictions) and numpy arrays (the fit) agree."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from gpuwise.runtime.laws import PRIOR, load_laws, tiled_time_s

# (sm_count, fp32 peak, DRAM bandwidth): a T4-, V100-, A100-, H100- and RTX 4090-like GPU.
GPUS = ((40, 8.1e12, 320e9), (80, 15.7e12, 900e9), (108, 19.5e12, 1555e9), (132, 67e12, 3350e9),
        (128, 82.6e12, 1008e9))


def _laws():
    laws = [*load_laws().tiled.values(), *PRIOR.tiled.values()]
    # Tensor-core kernels run the law at full utilisation (kernels._tiled).
    return laws + [dataclasses.replace(law, u_max=1.0) for law in laws]


def _shapes(rng, count):
    def dim(lo, hi):
        return np.floor(np.exp(rng.uniform(np.log(lo), np.log(hi), count)))
    k = dim(1, 1 << 17)
    k[::3] += rng.uniform(0, 1, k[::3].size)     # a fused attention's equivalent K is not an integer
    return dim(1, 64), dim(1, 1 << 16), dim(1, 1 << 16), k


@pytest.mark.parametrize("power_ratio, power_exponent", [(math.inf, 0.0), (0.4, 0.78), (3.0, 0.78)])
@pytest.mark.parametrize("sm, peak, bandwidth", GPUS)
def test_scalar_and_array_tiled_times_agree_on_random_shapes(sm, peak, bandwidth, power_ratio, power_exponent):
    batch, m, n, k = _shapes(np.random.default_rng(sm), 300)
    kw = dict(sm_count=sm, peak_flops_per_s=peak, bandwidth_bytes_per_s=bandwidth, power_ratio=power_ratio,
              power_exponent=power_exponent)
    for law in _laws():
        arr = tiled_time_s(law, batch, m, n, k, **kw)
        for i in range(batch.size):
            one = tiled_time_s(law, int(batch[i]), int(m[i]), int(n[i]), float(k[i]), **kw)
            assert type(one) is float
            assert one == pytest.approx(arr[i], rel=1e-12, abs=0), (law, batch[i], m[i], n[i], k[i])
