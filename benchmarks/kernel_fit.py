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

from gpuwise.catalog import load_catalog

MAX_FIT_ROWS = 4000     # at most this many rows per GPU and class enter a fit (fixed seed 0)
ROBUST_SCALE = 0.2      # soft-L1 scale on log latency
# vidur's GPU folders -> catalog ids. vidur does not name its A100: its profiling ran on Azure's NC A100 v4
# machines (A100 80GB PCIe, 300 W), taken as such; its H100 is a DGX's (SXM).
VIDUR_GPUS = {"a100": "a100-80gb-pcie", "h100": "h100-sxm", "a40": "a40"}


def sig(x: float) -> float:
    """The logistic: a fitted share in (0, 1)."""
    return 1 / (1 + math.exp(-x))


@functools.lru_cache(maxsize=None)
def catalog_specs(gpu_id: str) -> dict[str, float]:
    """SMs, fp16 dense peak (FLOP/s), bandwidth (bytes/s) and TDP (W) of a catalog GPU (do not modify: cached)."""
    g = next(x for x in load_catalog(user_file=False).gpus if x.id == gpu_id)
    return {"sm": float(g.sm_count), "peak": float(g.peak("fp16")) * 1e12, "bw": float(g.memory_bandwidth_gbs) * 1e9,
            "tdp": float(g.tdp_w)}
