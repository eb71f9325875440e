"""A GPU without a calibration of its own carries the closest calibrated GPU's (a new user's second trial, defect 2).

Before: with 2 runs on an RTX 4090 and 1 on an A100 40GB SXM4, the A100 PCIe and the A100 80GB SXM4 carried the
4090's factors (the most runs), and recommend ranked an A100 PCIe 1.7x faster than the measured A100 SXM4. Now one
chip, then one architecture, comes before the number of runs.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwise.calibrate import apply
from gpuwise.calibrate.apply import carried_calibration, correction
from gpuwise.calibrate.fit import FitRow, fit_gpu
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import model_for
from gpuwise.workload import Workload


def _cal(gpu: str, runs: int, slower: float, today: str = "2026-12-07"):
    rows = [FitRow(f"{gpu}-{i}", {"matmul/fp16": 0.010 * (i + 1)}, 0.0, slower * 0.010 * (i + 1))
            for i in range(runs)]
    return fit_gpu(gpu, rows, today=today)


@pytest.fixture(scope="module")
def cat():
    return load_catalog(user_file=False)


@pytest.fixture(scope="module")
def cals():
    return {"rtx-4090": _cal("rtx-4090", 2, 1.2), "a100-40gb-sxm4": _cal("a100-40gb-sxm4", 1, 2.0)}


@pytest.mark.parametrize("gpu, carried", [("a100-40gb-pcie", "a100-40gb-sxm4"), ("a100-80gb-sxm4", "a100-40gb-sxm4"),
                                          ("rtx-4090d", "rtx-4090"), ("h100-sxm", "rtx-4090")])
def test_the_closest_calibrated_gpu_is_carried_then_the_most_runs(cat, cals, gpu, carried):
    target = resolve_gpu(cat, gpu)
    for order in (cals, dict(reversed(list(cals.items())))):
        assert carried_calibration(order, target, cat).gpu == carried


def test_a_variant_is_its_base_chip(cat):
    base = resolve_gpu(cat, "a100-40gb-sxm4")
    variant = replace(base, id="my-a100", name="My A100", based_on="a100-40gb-sxm4")
    gpus = {g.id: g for g in (*cat.gpus, variant)}
    near = [apply.closeness(g, base, gpus)
            for g in (variant, *(resolve_gpu(cat, n) for n in ("a100-40gb-pcie", "rtx-3090", "rtx-4090")))]
    assert near == sorted(near, reverse=True) and len(set(near)) == 4   # chip, compute capability, arch, other


def test_an_a100_pcie_estimate_carries_the_measured_a100(cat, cals):
    w = Workload("torchvision:resnet18", batch_size=64, precision="amp-fp16", optimizer="momentum")
    est = model_for(w, correction=correction(cals, cat)).estimate(resolve_gpu(cat, "a100-40gb-pcie"))
    assert est.calibration_carried_from == "a100-40gb-sxm4"
    assert "calibrated with 1 of your runs on a100-40gb-sxm4" in est.calibration
