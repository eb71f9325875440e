"""GPU names: canonical ids, aliases and the exact names NVML reports all find their GPU."""

from __future__ import annotations

import pytest

from gpuwise.catalog import CatalogError, builtin_catalog, name_key, offers_for, resolve_gpu

CATALOG = builtin_catalog()

# Names as nvidia-smi / NVML print them on real machines -> canonical id.
NVML_NAMES = {
    "Tesla T4": "t4",
    "Tesla P100-PCIE-16GB": "p100-16gb-pcie",
    "Tesla V100-SXM2-16GB": "v100-16gb-sxm2",
    "Tesla V100-SXM2-32GB": "v100-32gb-sxm2",
    "Tesla V100-PCIE-16GB": "v100-16gb-pcie",
    "Tesla V100-PCIE-32GB": "v100-32gb-pcie",
    "Tesla V100S-PCIE-32GB": "v100s",
    "NVIDIA A10": "a10",
    "NVIDIA A10G": "a10g",
    "NVIDIA A30": "a30",
    "NVIDIA A40": "a40",
    "NVIDIA A100-SXM4-40GB": "a100-40gb-sxm4",
    "NVIDIA A100-SXM4-80GB": "a100-80gb-sxm4",
    "NVIDIA A100-PCIE-40GB": "a100-40gb-pcie",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA A800-SXM4-80GB": "a800-80gb-sxm4",
    "NVIDIA L4": "l4",
    "NVIDIA L20": "l20",
    "NVIDIA L40S": "l40s",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H100 NVL": "h100-nvl",
    "NVIDIA H800": "h800",
    "NVIDIA H20": "h20",
    "NVIDIA H200": "h200",
    "NVIDIA B200": "b200",
    "NVIDIA GeForce RTX 2080 Ti": "rtx-2080-ti",
    "GeForce RTX 2080 Ti": "rtx-2080-ti",  # drivers before 2021 left out "NVIDIA"
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA GeForce RTX 4090 D": "rtx-4090d",
    "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA RTX A6000": "rtx-a6000",
    "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada",
}


@pytest.mark.parametrize("nvml_name", sorted(NVML_NAMES))
def test_exact_nvml_names_resolve(nvml_name):
    assert resolve_gpu(CATALOG, nvml_name).id == NVML_NAMES[nvml_name]


def test_every_listed_nvml_name_resolves_to_its_own_gpu():
    for gpu in CATALOG.gpus:
        for name in (gpu.id, gpu.name, *gpu.aliases, *gpu.nvml_names):
            assert resolve_gpu(CATALOG, name) is gpu


@pytest.mark.parametrize("typed, expected", [
    ("a100-80gb", "a100-80gb-sxm4"), ("A100-80GB", "a100-80gb-sxm4"), ("Tesla_T4", "t4"), ("t4", "t4"),
    ("nvidia_a100_80gb_pcie", "a100-80gb-pcie"), ("TESLA V100-SXM2-16GB", "v100-16gb-sxm2"),
    ("rtx4090", "rtx-4090"), ("RTX 4090", "rtx-4090"), ("GeForce RTX 3090", "rtx-3090"), ("4090", "rtx-4090"),
    ("  h100 sxm  ", "h100-sxm"), ("A6000", "rtx-a6000"),
])
def test_names_resolve_case_insensitively_with_underscores_and_optional_vendor_prefix(typed, expected):
    assert resolve_gpu(CATALOG, typed).id == expected


def test_name_key_drops_vendor_prefixes_and_separators_only():
    assert name_key("NVIDIA GeForce RTX 4090") == name_key("rtx_4090") == "rtx4090"
    assert name_key("Tesla") == "tesla"  # a prefix alone is the name itself


def test_unknown_name_is_refused_with_the_closest_gpus():
    with pytest.raises(CatalogError) as err:
        resolve_gpu(CATALOG, "a100-90gb")
    message = str(err.value)
    assert "'a100-90gb'" in message and "did you mean" in message and "a100-80gb-sxm4" in message
    assert "\n" not in message


def test_unknown_name_with_nothing_close_points_to_the_list():
    with pytest.raises(CatalogError, match="gpuwise gpus"):
        resolve_gpu(CATALOG, "voodoo2")


def test_offers_for_filters_by_provider_and_spot_cheapest_first():
    all_t4 = offers_for(CATALOG, "Tesla T4")
    assert {o.provider for o in all_t4} >= {"aws", "gcp", "aliyun"}
    aws = offers_for(CATALOG, "t4", provider="AWS")
    assert aws and {o.provider for o in aws} == {"aws"}
    assert [o.price_per_gpu_hour for o in aws] == sorted(o.price_per_gpu_hour for o in aws)
    assert all(o.spot for o in offers_for(CATALOG, "t4", spot=True))
    assert not any(o.spot for o in offers_for(CATALOG, "t4", spot=False))
    assert offers_for(CATALOG, "b200", provider="autodl") == []
    with pytest.raises(CatalogError):
        offers_for(CATALOG, "no-such-gpu")
