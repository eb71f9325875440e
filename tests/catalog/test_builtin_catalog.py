"""The shipped data: every GPU passes validation, and the issue's GPUs and offers are all there."""

from __future__ import annotations

import re

import pytest

from gpuwise.catalog import PRECISIONS, builtin_catalog, load_catalog, resolve_gpu
from gpuwise.catalog.validate import gpu_problems, offer_problems

CATALOG = builtin_catalog()

# Every GPU the issue names, by a name a renter would type.
ISSUE_GPUS = [
    "T4", "V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIE-16GB", "V100-PCIE-32GB", "A10", "A10G", "A30", "A40",
    "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-40GB", "A100 80GB PCIe", "A800-SXM4-80GB", "L4", "L20", "L40", "L40S",
    "H100 SXM", "H100 PCIe", "H100 NVL", "H800", "H20", "H200", "B200", "RTX 2080 Ti", "RTX 3080", "RTX 3090",
    "RTX 4080", "RTX 4090", "RTX 4090D", "RTX 5090", "RTX A4000", "RTX A5000", "RTX A6000", "RTX 6000 Ada",
]


def test_ships_at_least_thirty_gpus_including_every_one_the_issue_names():
    assert len(CATALOG.gpus) >= 30
    found = {name: resolve_gpu(CATALOG, name).id for name in ISSUE_GPUS}
    assert len(set(found.values())) == len(ISSUE_GPUS), found


@pytest.mark.parametrize("gpu", CATALOG.gpus, ids=lambda g: g.id)
def test_every_shipped_gpu_passes_validation(gpu):
    assert gpu_problems(gpu) == []
    assert set(gpu.peak_tflops) == set(PRECISIONS)
    assert gpu.source.strip() and gpu.nvml_names, "every GPU cites a source and names what NVML reports"


def test_architectures_without_a_precision_have_null_for_it():
    for name in ("t4", "v100-16gb-sxm2", "v100-32gb-pcie", "rtx-2080-ti"):
        gpu = resolve_gpu(CATALOG, name)
        assert gpu.peak("bf16") is None and gpu.peak("tf32") is None and not gpu.has_bf16
    for name in ("a100-40gb-sxm4", "a10", "rtx-3090"):
        assert resolve_gpu(CATALOG, name).peak("fp8") is None


def test_geforce_fp16_is_the_fp32_accumulate_rate_and_datacentre_is_dense_not_sparse():
    # GeForce: fp16 with fp32 accumulate = 2x fp32 (half the fp16-accumulate rate of the tensor cores).
    for name in ("rtx-3090", "rtx-4090", "rtx-4090d", "rtx-5090"):
        gpu = resolve_gpu(CATALOG, name)
        assert gpu.peak("fp16") == pytest.approx(2 * gpu.peak("fp32"), rel=0.02)
    # Dense, not the sparse headline: A100 312 (not 624), H100 SXM 989 (not 1979).
    assert resolve_gpu(CATALOG, "a100-80gb").peak("bf16") == 312
    assert resolve_gpu(CATALOG, "h100-sxm").peak("bf16") == pytest.approx(989.4)


def test_memory_is_stored_in_bytes_of_the_chips_binary_size():
    assert resolve_gpu(CATALOG, "a100-40gb").memory_bytes == 40 * 2**30
    assert resolve_gpu(CATALOG, "t4").memory_bytes == 16 * 2**30
    assert resolve_gpu(CATALOG, "h100-sxm").l2_bytes == 50 * 2**20


def test_memory_nvidia_smi_shows_is_recorded_where_known():
    t4 = resolve_gpu(CATALOG, "Tesla T4")
    assert t4.nvml_memory_bytes == 15360 * 2**20 == t4.visible_memory_bytes < t4.memory_bytes
    a30 = resolve_gpu(CATALOG, "a30")
    assert a30.nvml_memory_bytes is None and a30.visible_memory_bytes == a30.memory_bytes


def test_gddr_cards_with_ecc_on_show_what_nvml_shows_whether_or_not_their_figure_is_recorded():
    # before: an L40S (NVML figure recorded) showed 45.0 GiB while the same 48 GiB of GDDR6 with ECC on in an
    # L40 or A40 showed 48.0 GiB: a job between the two fitted one and not the other
    from gpuwise.catalog.model import ECC_RESERVED_SHARE

    recorded = [g for g in CATALOG.gpus if g.ecc_reserves_memory and g.nvml_memory_bytes]
    assert {g.id for g in recorded} >= {"t4", "a10", "l4", "l40s"}
    for gpu in recorded:   # the rule against every NVML figure there is: the driver's few MiB apart
        rule = gpu.memory_bytes * (1 - ECC_RESERVED_SHARE)
        assert 0 <= rule - gpu.nvml_memory_bytes <= 16 * 2**20, gpu.id
    same_chips = {resolve_gpu(CATALOG, n).visible_memory_bytes for n in ("L40", "L40S", "A40", "L20")}
    assert max(same_chips) - min(same_chips) <= 16 * 2**20
    assert resolve_gpu(CATALOG, "l40").visible_memory_bytes < 46 * 2**30
    # HBM keeps its check bits on the side, GeForce and workstation cards ship with ECC off
    assert not any(resolve_gpu(CATALOG, n).ecc_reserves_memory for n in ("a30", "h100-sxm", "rtx-4090", "rtx-a6000"))


def test_unverified_rows_are_marked_and_verified_rows_cite_a_url():
    unverified = {g.id for g in CATALOG.gpus if not g.verified}
    assert {"h20", "l20", "a10g", "b200"} <= unverified
    verified = [g for g in CATALOG.gpus if g.verified]
    assert {"t4", "a100-40gb-sxm4", "h100-sxm"} <= {g.id for g in verified}
    for gpu in verified:
        assert "http" in gpu.source or "whitepaper" in gpu.source.lower(), gpu.id


def test_shipped_offers_are_valid_indicative_and_dated():
    assert CATALOG.offers
    ids = {g.id for g in CATALOG.gpus}
    for offer in CATALOG.offers:
        assert offer_problems(offer) == []
        assert offer.gpu_id in ids
        assert offer.indicative
        assert re.fullmatch(r"2026-11-\d\d", offer.checked)
        assert "indicative" in offer.source


def test_shipped_offers_cover_cny_and_usd_spot_and_multi_gpu():
    providers = {o.provider for o in CATALOG.offers}
    assert {"autodl", "aws", "gcp", "lambda", "runpod"} <= providers
    assert {o.currency for o in CATALOG.offers if o.provider == "autodl"} == {"CNY"}
    assert {o.currency for o in CATALOG.offers if o.provider in ("aws", "gcp", "lambda", "runpod")} == {"USD"}
    assert any(o.spot for o in CATALOG.offers)
    assert {2, 4, 8} <= {o.count for o in CATALOG.offers}
    autodl = {o.gpu_id: o for o in CATALOG.offers if o.provider == "autodl" and o.count == 1}
    for gpu in ("rtx-4090", "rtx-3090", "a100-40gb-pcie", "a800-80gb-pcie", "v100-32gb-sxm2", "l20", "h800", "h20"):
        assert gpu in autodl
    # The product's story: an A100 40GB at about 15 CNY/h costs several 4090-hours.
    a100 = min(o.price_per_gpu_hour for o in CATALOG.offers if o.gpu_id == "a100-40gb-sxm4" and o.currency == "CNY")
    assert a100 > 5 * autodl["rtx-4090"].price_per_gpu_hour


def test_load_catalog_without_user_files_is_the_builtin_catalog():
    assert load_catalog(user_file=False) == CATALOG
