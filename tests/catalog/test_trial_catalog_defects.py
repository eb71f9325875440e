"""What a new user's trial of the catalog found: a real GPU's name resolving to its bigger sibling, MIG slices
unknown, the A10G's fp32 copied from the A10, --min-memory and --sort memory on a figure the table does not
show, and catalog-file and `gpus` messages that were not one clear line."""

from __future__ import annotations

import pytest

from gpuwise.catalog import CatalogError, load_catalog, resolve_gpu
from gpuwise.catalog.query import select_gpus
from gpuwise.catalog.resolve import AmbiguousGpuName

CATALOG = load_catalog(user_file=False)


# --- 1. a complete model name is never its Ti / Ada / SUPER sibling ------------------------------------------

@pytest.mark.parametrize("name, sibling", [
    ("Quadro RTX 6000", "rtx-6000-ada"),
    ("NVIDIA GeForce RTX 4070", "rtx-4070-ti"),
    ("NVIDIA GeForce RTX 4060", "rtx-4060-ti"),
    ("NVIDIA GeForce RTX 2080", "rtx-2080-ti"),
    ("rtx 4060", "rtx-4060-ti"),
])
def test_a_real_gpu_the_catalog_lacks_is_unknown_with_suggestions_not_its_bigger_sibling(name, sibling):
    with pytest.raises(CatalogError) as err:
        resolve_gpu(CATALOG, name)
    assert not isinstance(err.value, AmbiguousGpuName)
    message = str(err.value)
    assert message.startswith(f"unknown GPU {name!r}") and "did you mean" in message and sibling in message
    assert "\n" not in message


@pytest.mark.parametrize("typed, gpu_id", [
    ("4090", "rtx-4090"), ("a10g", "a10g"), ("4060 ti", "rtx-4060-ti"), ("a100-80gb-s", "a100-80gb-sxm4"),
    ("h100 sx", "h100-sxm"), ("RTX 6000 Ada", "rtx-6000-ada"),
    # a memory size without its unit: "gb" goes on, not a variant (refused by the first form of the rule)
    ("L40S 48", "l40s"), ("A30 24", "a30"), ("H200 141", "h200"), ("a10g 24", "a10g"), ("l4 24", "l4"),
    ("h100 pcie 80", "h100-pcie"), ("rtx 4060 ti 16", "rtx-4060-ti"), ("rtx 3080 10", "rtx-3080"),
])
def test_short_forms_users_type_still_find_their_gpu(typed, gpu_id):
    assert resolve_gpu(CATALOG, typed).id == gpu_id


def test_gpus_with_a_4060_exits_2_in_one_line(cli_run):
    code, out, err = cli_run("gpus", "NVIDIA GeForce RTX 4060")
    assert code == 2 and out == "" and err.count("\n") == 1 and "unknown GPU" in err


# --- 4. MIG slices resolve to their parent GPU and the slice ---------------------------------------------------

def test_a_mig_slice_resolves_to_its_parent_and_the_slice():
    from gpuwise.catalog.resolve import resolve_mig

    gpu, mig = resolve_mig(CATALOG, "NVIDIA A100-SXM4-40GB MIG 1g.5gb")
    assert gpu.id == "a100-40gb-sxm4"
    assert mig.profile == "1g.5gb" and mig.memory_bytes == 5 * 10**9
    assert mig.compute_fraction == pytest.approx(1 / 7) and mig.memory_fraction == pytest.approx(1 / 8)
    assert resolve_mig(CATALOG, "NVIDIA A100-SXM4-40GB") == (gpu, None)


def test_resolve_gpu_gives_a_mig_slice_its_own_memory_and_share_of_the_compute():
    parent = resolve_gpu(CATALOG, "h100-sxm")
    part = resolve_gpu(CATALOG, "NVIDIA H100 80GB HBM3 MIG 3g.40gb")
    assert "mig" in part.id and part.id != parent.id and part.visible_memory_bytes == 40 * 10**9
    assert part.peak("bf16") == pytest.approx(parent.peak("bf16") * 3 / 7)
    assert part.memory_bandwidth_gbs == pytest.approx(parent.memory_bandwidth_gbs / 2)
    assert part.boost_clock_hz == pytest.approx(parent.boost_clock_hz, rel=1e-3)     # fewer SMs, the same clock
    assert resolve_gpu(CATALOG, part.id) == part                            # the slice's id resolves back
    assert resolve_gpu(CATALOG, "a100-80gb mig 1c.3g.40gb").peak("fp16") == pytest.approx(312 / 7)


@pytest.mark.parametrize("name, why", [
    ("rtx 4090 MIG 1g.5gb", "has no MIG"),
    ("NVIDIA A100-SXM4-40GB MIG 8g.40gb", "does not fit"),
    ("NVIDIA A100-SXM4-40GB MIG 1g.80gb", "does not fit"),
])
def test_a_mig_slice_a_gpu_cannot_have_is_refused_in_one_line(name, why):
    with pytest.raises(CatalogError, match=why) as err:
        resolve_gpu(CATALOG, name)
    assert "\n" not in str(err.value)


def test_estimate_on_a_mig_slice_fits_its_memory_and_times_its_share(cli_json):
    job = ["estimate", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "256", "--json"]
    whole = cli_json([*job, "--gpu", "h100-sxm"])
    part = cli_json([*job, "--gpu", "NVIDIA H100 80GB HBM3 MIG 1g.10gb"])
    assert part["gpu"] == "h100-sxm-mig-1g.10gb"
    assert "of 8.8 GiB usable" in part["fit_summary"]       # 10 GB less the 5% headroom, not the H100's 80
    assert part["time"]["step_time_s"] > 2 * whole["time"]["step_time_s"]


def test_a_traced_step_on_a_mig_slice_gets_no_held_out_range(cli_json):
    # was: the whole GPUs' held-out range ("likely ... (8 in 10 held-out public runs)") on a slice no run measured
    job = ["estimate", "torchvision:resnet18", "--batch-size", "8", "--image-size", "64", "--json"]
    part = cli_json([*job, "--gpu", "NVIDIA A100-SXM4-40GB MIG 3g.20gb"])
    assert part["time"]["regime"] == "mig"
    assert part["time"]["likely_step_time_range_s"] is None
    assert "MIG slice" in part["time"]["likely_range_note"]
    assert cli_json([*job, "--gpu", "a100-40gb-sxm4"])["time"]["regime"] != "mig"


# --- 5. the A10G's own fp32 ------------------------------------------------------------------------------------

def test_a10g_fp32_is_its_cores_times_two_times_its_boost_clock_and_not_below_tf32():
    a10g = CATALOG.gpu("a10g")
    assert a10g.peak("fp32") == pytest.approx(10240 * 2 * 1.71e9 / 1e12, abs=0.05)
    assert a10g.peak("tf32") <= a10g.peak("fp32")
    assert not a10g.verified and "boost" in a10g.source


# --- 6. --min-memory and --sort memory use the memory shown ----------------------------------------------------

def test_sort_memory_orders_by_the_memory_the_table_shows():
    shown = [r.gpu.visible_memory_bytes for r in select_gpus(CATALOG, sort="memory")]
    assert shown == sorted(shown, reverse=True)


def test_min_memory_keeps_only_gpus_showing_that_much():
    rows = select_gpus(CATALOG, min_memory_bytes=16 * 2**30)
    assert rows and all(r.gpu.visible_memory_bytes >= 16 * 2**30 for r in rows)
    assert "t4" not in {r.gpu.id for r in rows}          # 16 GiB of DRAM, 15 GiB shown


# --- 7. catalog files and `gpus` -------------------------------------------------------------------------------

OFFER = """
[[offer]]
provider = "autodl"
gpu = "RTX 4090"
price_per_hour = 1.78
currency = "CNY"
source = "autodl.com market"
"""


def test_a_toml_date_is_taken_as_its_iso_text(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(OFFER + "checked = 2026-12-01\n")
    mine = [o for o in load_catalog(path, user_file=False).offers if not o.indicative]
    assert [o.checked for o in mine] == ["2026-12-01"]


@pytest.mark.parametrize("checked", ["2099-01-01", '"2099-01-01"'])
def test_a_checked_date_in_the_future_is_refused_in_one_line(tmp_path, checked):
    path = tmp_path / "c.toml"
    path.write_text(OFFER + f"checked = {checked}\n")
    with pytest.raises(CatalogError) as err:
        load_catalog(path, user_file=False)
    message = str(err.value)
    assert "key 'checked'" in message and "2099-01-01 is in the future" in message and "\n" not in message


def test_a_wrong_type_is_said_as_the_file_wrote_it_not_as_a_python_repr(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(OFFER + "checked = 10:30:00\n")
    with pytest.raises(CatalogError, match="key 'checked' must be a date.*, got 10:30:00$") as err:
        load_catalog(path, user_file=False)
    assert "datetime" not in str(err.value)


def test_a_misspelt_key_suggests_the_key_its_word_starts(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(OFFER.replace("price_per_hour", "prise") + 'checked = "2026-12-01"\n')
    with pytest.raises(CatalogError, match=r"unknown key 'prise' \(did you mean: price_per_hour"):
        load_catalog(path, user_file=False)


def test_sort_is_case_insensitive_as_provider_is(cli_json):
    assert cli_json(["gpus", "--sort", "PRICE", "--json"]) == cli_json(["gpus", "--sort", "price", "--json"])
    assert cli_json(["gpus", "--sort", " Memory", "--json"]) == cli_json(["gpus", "--sort", "memory", "--json"])


def test_no_matching_offer_is_one_line_not_an_empty_table(cli_run):
    code, out, err = cli_run("gpus", "--provider", "lambda", "t4")
    assert code == 0 and "no offer from lambda for t4" in out
    assert "offers (shipped" not in out and "provider" not in out
