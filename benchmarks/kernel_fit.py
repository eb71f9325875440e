"""What the per-kernel fits share: their settings (chosen before any of them was run) and the GPU specs
of the modern kernel data, read from the catalog.

``kernel_laws`` (fp32, NeuSight), ``tensor_laws`` (fp16 GEMMs, vidur and MAMF) and ``memory_kernels``
(vidur's memory-bound kernels) fit by robust least squares on log latency with the same loss scale and
row cap. A module of its own so that a script importing these does not depend on another script's
source (``benchmarks/registry.py`` hashes what each benchmark imports).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.optimize import least_squares

from gpuwise.catalog import load_catalog

MAX_FIT_ROWS = 4000     # at most this many rows per GPU and class enter a fit (fixed seed 0)
ROBUST_SCALE = 0.2      # soft-L1 scale on log latency
# vidur's GPU folders -> catalog ids. vidur does not name its A100: its profiling ran on Azure's NC A100 v4
# machines (A100 80GB PCIe, 300 W), taken as such; its H100 is a DGX's (SXM).
VIDUR_GPUS = {"a100": "a100-80gb-pcie", "h100": "h100-sxm", "a40": "a40"}


def robust_least_squares(residuals, theta0, **kwargs):
    """scipy's ``least_squares`` with the fits' loss (soft L1 at ``ROBUST_SCALE``, relative difference step
    1e-4), restarted from the result where a coordinate ended within 1e-12 of zero: scipy 1.17 takes the
    relative step literally, so a first trust-region step that lands on zero (a one-parameter fit started at
    1.7 lands on -2e-16) gets a zero step, reads a zero gradient and stops there (the norm law came out at
    sig(0) = 0.5 with its optimum at 0.55; 2026-12-06)."""
    opts = dict(loss="soft_l1", f_scale=ROBUST_SCALE, diff_step=1e-4, max_nfev=300, **kwargs)
    res = least_squares(residuals, theta0, **opts)
    stuck = np.abs(res.x) < 1e-12
    if stuck.any():
        res = least_squares(residuals, np.where(stuck, 0.0, res.x), **opts)
    return res


def sig(x: float) -> float:
    """The logistic: a fitted share in (0, 1)."""
    return 1 / (1 + math.exp(-x))


@functools.lru_cache(maxsize=None)
def catalog_specs(gpu_id: str) -> dict[str, float]:
    """SMs, fp16 dense peak (FLOP/s), bandwidth (bytes/s) and TDP (W) of a catalog GPU (do not modify: cached)."""
    g = next(x for x in load_catalog(user_file=False).gpus if x.id == gpu_id)
    return {"sm": float(g.sm_count), "peak": float(g.peak("fp16")) * 1e12, "bw": float(g.memory_bandwidth_gbs) * 1e9,
            "tdp": float(g.tdp_w)}
