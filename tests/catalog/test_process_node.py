"""Each GPU's process node and FP32 lanes per SM: specs the time model's power level reads (issue 28). The node
comes from the architecture (GA100 apart from the other Ampere chips) unless a catalog entry gives its own."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.catalog import CatalogError, builtin_catalog, load_catalog
from gpuwise.catalog.model import fp32_issue_lanes, process_nm_of

from test_user_catalog import MY_GPU, NEW_GPU, write


def _gpu(catalog, gpu_id):
    return next(g for g in catalog.gpus if g.id == gpu_id)


@pytest.mark.parametrize("gpu_id, node_nm, lanes", [
    ("p100-16gb-pcie", 16, 64), ("v100-16gb-pcie", 12, 64), ("t4", 12, 64), ("a100-80gb-sxm4", 7, 64),
    ("a30", 7, 64), ("a10", 8, 128), ("rtx-3090", 8, 128), ("l4", 5, 128), ("h100-sxm", 5, 128), ("b200", 5, 128),
])
def test_shipped_gpus_have_their_chips_node_and_lanes(gpu_id, node_nm, lanes):
    gpu = _gpu(builtin_catalog(), gpu_id)
    assert gpu.process_nm == node_nm
    assert gpu.fp32_lanes_per_sm == lanes


def test_issue_lanes_follow_the_compute_capability_not_the_core_count():
    """A GP104 (P4, compute capability 6.1) has 128 CUDA cores per SM but dual-issues: no shared-slot limit;
    a variant with fewer SMs keeps its chip's issue width (cuda_cores / sm_count would read 70.5)."""
    assert fp32_issue_lanes("6.1") == 64 and fp32_issue_lanes("8.0") == 64 and fp32_issue_lanes("7.5") == 64
    assert fp32_issue_lanes("8.6") == 128 and fp32_issue_lanes("9.0") == 128 and fp32_issue_lanes("12.0") == 128
    a100 = _gpu(builtin_catalog(), "a100-80gb-sxm4")
    assert dataclasses.replace(a100, sm_count=98).fp32_lanes_per_sm == 64


def test_every_shipped_gpu_has_a_node():
    assert all(g.process_nm for g in builtin_catalog().gpus)
    assert process_nm_of("ampere", "8.0") == 7 and process_nm_of("ampere", "8.6") == 8
    assert process_nm_of("unknown", "9.9") is None


def test_a_user_gpu_may_give_its_own_node_and_a_variant_of_another_chip_gets_its_architectures(tmp_path):
    own = NEW_GPU.split("[[offer]]")[0].replace('pcie_gen = 3', 'pcie_gen = 3\nprocess_nm = 11')
    assert _gpu(load_catalog(write(tmp_path / "own.toml", own)), "rtx-titan").process_nm == 11
    assert _gpu(load_catalog(write(tmp_path / "new.toml", NEW_GPU)), "rtx-titan").process_nm == 12   # turing
    assert _gpu(load_catalog(write(tmp_path / "var.toml", MY_GPU)), "my-a100-250w").process_nm == 7  # inherited
    other_chip = MY_GPU + 'arch = "hopper"\ncompute_capability = "9.0"\n'
    assert _gpu(load_catalog(write(tmp_path / "chip.toml", other_chip)), "my-a100-250w").process_nm == 5


@pytest.mark.parametrize("value", ["0.5", "200", '"7nm"'])
def test_a_nonsense_node_is_refused_naming_the_key(tmp_path, value):
    bad = NEW_GPU.split("[[offer]]")[0].replace('pcie_gen = 3', f'pcie_gen = 3\nprocess_nm = {value}')
    with pytest.raises(CatalogError, match="process_nm"):
        load_catalog(write(tmp_path / "bad.toml", bad))
