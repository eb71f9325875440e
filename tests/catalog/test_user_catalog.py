"""The user's catalog (~/.config/gpuwise/catalog.toml, --catalog FILE) adds or overrides GPUs and
offers; a malformed one is refused whole, naming the file, the key and what is wrong."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpuwise.catalog import CatalogError, builtin_catalog, load_catalog, offers_for, resolve_gpu, user_catalog_path

MY_GPU = """
[[gpu]]
id = "my-a100-250w"
based_on = "NVIDIA A100-SXM4-40GB"
name = "A100 40GB capped at 250 W"
tdp_w = 250
"""

OWN_OFFER = """
[[offer]]
provider = "mylab"
gpu = "Tesla T4"
count = 2
price_per_hour = 1.6
currency = "CNY"
source = "our invoice"
checked = "2026-12-01"
"""

NEW_GPU = """
[[gpu]]
id = "rtx-titan"
name = "NVIDIA TITAN RTX"
nvml_names = ["NVIDIA TITAN RTX"]
arch = "turing"
compute_capability = "7.5"
sm_count = 72
cuda_cores = 4608
tensor_cores = 576
memory = "24GiB"
memory_bandwidth_gbs = 672
l2 = "6MiB"
peak_tflops = { fp32 = 16.3, fp16 = 130.5, int8 = 261 }
tdp_w = 280
pcie_gen = 3
source = "NVIDIA TITAN RTX spec page"

[[offer]]
provider = "attic"
gpu = "TITAN_RTX"
price_per_hour = 0.5
currency = "CNY"
source = "electricity"
checked = "2026-12-01"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_user_file_location_honours_gpuwise_config_dir_then_xdg(monkeypatch, tmp_path):
    assert user_catalog_path() == Path(tmp_path / "config" / "catalog.toml")
    monkeypatch.delenv("GPUWISE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert user_catalog_path() == tmp_path / "xdg" / "gpuwise" / "catalog.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_catalog_path() == tmp_path / "home" / ".config" / "gpuwise" / "catalog.toml"


def test_user_file_adds_a_gpu_and_offers_that_then_resolve(isolated_config):
    write(isolated_config / "catalog.toml", NEW_GPU + OWN_OFFER)
    catalog = load_catalog()
    titan = resolve_gpu(catalog, "NVIDIA TITAN RTX")
    assert titan.memory_bytes == 24 * 2**30 and titan.peak("bf16") is None
    attic = offers_for(catalog, "rtx-titan")
    assert [(o.provider, o.price_per_hour, o.indicative) for o in attic] == [("attic", 0.5, False)]
    mine = offers_for(catalog, "t4", provider="mylab")[0]
    assert mine.count == 2 and mine.price_per_gpu_hour == pytest.approx(0.8) and not mine.spot
    assert len(catalog.gpus) == len(builtin_catalog().gpus) + 1


def test_user_file_is_skipped_with_user_file_false(isolated_config):
    write(isolated_config / "catalog.toml", NEW_GPU)
    with pytest.raises(CatalogError):
        resolve_gpu(load_catalog(user_file=False), "rtx-titan")


def test_same_provider_gpu_count_and_spot_overrides_the_shipped_offer(tmp_path):
    shipped = next(o for o in offers_for(builtin_catalog(), "rtx-4090", provider="autodl") if o.count == 1)
    path = write(tmp_path / "prices.toml", """
        [[offer]]
        provider = "AutoDL"
        gpu = "4090"
        price_per_hour = 1.78
        currency = "CNY"
        source = "seen on the site today"
        checked = "2026-12-02"
        """)
    offers = [o for o in offers_for(load_catalog(path), "rtx-4090", provider="autodl") if o.count == 1]
    assert len(offers) == 1 and offers[0].price_per_hour == 1.78 != shipped.price_per_hour
    assert offers[0].checked == "2026-12-02" and not offers[0].indicative


def test_a_gpu_based_on_a_shipped_one_inherits_its_datasheet_but_not_its_names(tmp_path):
    catalog = load_catalog(write(tmp_path / "c.toml", MY_GPU))
    mine, a100 = resolve_gpu(catalog, "my-a100-250w"), resolve_gpu(catalog, "a100-40gb")
    assert mine.tdp_w == 250 and a100.tdp_w == 400
    assert mine.peak_tflops == a100.peak_tflops and mine.memory_bytes == a100.memory_bytes
    assert mine.nvml_names == () and not mine.verified
    assert resolve_gpu(catalog, "NVIDIA A100-SXM4-40GB") is a100


def test_a_gpu_with_a_shipped_id_replaces_it(tmp_path):
    path = write(tmp_path / "c.toml", """
        [[gpu]]
        id = "rtx-4090"
        based_on = "rtx-4090"
        memory = "48GiB"
        notes = "the Chinese 48 GB rework"
        """)
    catalog = load_catalog(path)
    modded = resolve_gpu(catalog, "NVIDIA GeForce RTX 4090")
    assert modded.memory_bytes == 48 * 2**30 and modded.nvml_memory_bytes is None  # the 24 GB figure no longer holds
    assert len(catalog.gpus) == len(builtin_catalog().gpus)


def test_command_line_file_applies_after_the_user_file(isolated_config, tmp_path):
    write(isolated_config / "catalog.toml", NEW_GPU)
    path = write(tmp_path / "later.toml", """
        [[offer]]
        provider = "attic"
        gpu = "rtx-titan"
        price_per_hour = 0.4
        currency = "CNY"
        source = "cheaper power"
        checked = "2026-12-02"
        """)
    assert [o.price_per_hour for o in offers_for(load_catalog(path), "rtx-titan")] == [0.4]


REFUSALS = {
    "bad TOML": ("[[offer]\nprovider = ", "not valid TOML"),
    "unknown field": (OWN_OFFER + "colour = 'red'\n", "unknown key 'colour'"),
    "unknown top-level table": ("[[gpus]]\nid = 'x'\n", "unknown key 'gpus'"),
    "negative price": (OWN_OFFER.replace("1.6", "-1.6"), "key 'price_per_hour': must be a price > 0"),
    "zero count": (OWN_OFFER.replace("count = 2", "count = 0"), "key 'count'"),
    "text for a number": (OWN_OFFER.replace("1.6", '"1.6"'), "key 'price_per_hour' must be a number"),
    "bad date": (OWN_OFFER.replace("2026-12-01", "yesterday"), "key 'checked'"),
    # before: accepted, as they look like ISO dates: a month 13, a February 30
    "month 13": (OWN_OFFER.replace("2026-12-01", "2026-13-01"), "key 'checked': '2026-13-01' is not a date"),
    "February 30": (OWN_OFFER.replace("2026-12-01", "2026-02-30"), "key 'checked': '2026-02-30' is not a date"),
    "missing currency": (OWN_OFFER.replace('currency = "CNY"\n', ""), "key 'currency' is missing"),
    "offer for an unknown GPU": (OWN_OFFER.replace("Tesla T4", "Tesla T5"), "key 'gpu': unknown GPU 'Tesla T5'"),
    "GPU with no memory": (NEW_GPU.replace('memory = "24GiB"\n', ""), "key 'memory' is missing"),
    "GPU with zero memory": (NEW_GPU.replace('"24GiB"', '"0GB"'), "key 'memory': must be a whole number > 0"),
    "memory without a unit it knows": (NEW_GPU.replace('"24GiB"', '"24 gigs"'), "key 'memory': not a size"),
    "sparse rate as dense": (NEW_GPU.replace("fp16 = 130.5", "fp16 = 261"), "key 'peak_tflops.fp16'"),
    "bf16 on Turing": (NEW_GPU.replace("fp16 = 130.5,", "fp16 = 130.5, bf16 = 130.5,"), "turing has no bf16"),
    "NVIDIA total above the DRAM size": (NEW_GPU.replace('memory = "24GiB"', 'memory = "24GiB"\nnvml_memory = "25GiB"'),
                                         "key 'nvml_memory'"),
    "unknown precision": (NEW_GPU.replace("int8 = 261", "fp4 = 522"), "key 'peak_tflops.fp4'"),
    "name taken by another GPU": (NEW_GPU.replace('["NVIDIA TITAN RTX"]', '["Tesla T4"]'), "'Tesla T4'"),
    "based_on an unknown GPU": (MY_GPU.replace("NVIDIA A100-SXM4-40GB", "A200"), "key 'based_on': unknown GPU"),
    # before: "unknown GPU 'A100' (did you mean: a10, p100-16gb-pcie, a10g?)" while `gpuwise gpus A100`
    # lists the four A100s: the loader had its own lookup
    "offer for a GPU family": (OWN_OFFER.replace("Tesla T4", "A100"),
                               "key 'gpu': GPU name 'A100' is ambiguous: it could be a100-40gb-pcie, a100-40gb-sxm4, "
                               "a100-80gb-pcie, a100-80gb-sxm4"),
    "based_on a GPU family": (MY_GPU.replace("NVIDIA A100-SXM4-40GB", "V100"), "key 'based_on': GPU name 'V100' is "
                              "ambiguous"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_malformed_catalog_file_is_refused_naming_file_key_and_problem(case, tmp_path):
    text, expected = REFUSALS[case]
    path = write(tmp_path / "broken.toml", text)
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


def test_a_malformed_user_file_is_refused_whole_and_nothing_of_it_is_used(isolated_config):
    # The first offer is fine, the second is not: the file is refused, not half-loaded.
    path = write(isolated_config / "catalog.toml", NEW_GPU + OWN_OFFER + OWN_OFFER.replace("1.6", "-1"))
    with pytest.raises(CatalogError, match=str(path)):
        load_catalog()
    path.unlink()
    assert load_catalog() == builtin_catalog()
    assert "mylab" not in {o.provider for o in builtin_catalog().offers}


def test_missing_catalog_file_is_refused(tmp_path):
    with pytest.raises(CatalogError, match="not found"):
        load_catalog(tmp_path / "nope.toml")
