"""`gpuwise gpus` through the real CLI: the JSON contract, the filters, and exit 2 on bad input.

Exit codes and stderr are checked in a real subprocess (the console script's entry point turns
errors into exit 2); the rest runs the same typer app in-process, which is quicker.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gpuwise.catalog import builtin_catalog
from gpuwise.cli.app import app

CONTRACT_GPU_KEYS = {"id", "name", "memory_bytes", "memory_bandwidth_gbs", "peak_tflops", "nvml_names", "offers"}
CONTRACT_OFFER_KEYS = {"provider", "price_per_hour", "currency", "spot", "source", "checked"}


def gpuwise(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True, timeout=120)


def gpus_json(*args: str) -> list[dict]:
    result = CliRunner().invoke(app, ["gpus", *args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stdout is one JSON object and nothing else
    assert set(doc) == {"gpus"}
    return doc["gpus"]


def test_json_lists_every_gpu_with_the_contract_fields():
    result = gpuwise("gpus", "--json")
    assert result.returncode == 0 and result.stderr == ""
    gpus = json.loads(result.stdout)["gpus"]
    assert [g["id"] for g in gpus] == [g.id for g in builtin_catalog().gpus]
    for g in gpus:
        assert CONTRACT_GPU_KEYS <= set(g)
        assert set(g["peak_tflops"]) == {"fp32", "tf32", "fp16", "bf16", "fp8", "int8"}
        assert isinstance(g["memory_bytes"], int) and isinstance(g["nvml_names"], list)
        for offer in g["offers"]:
            assert CONTRACT_OFFER_KEYS <= set(offer)
            assert isinstance(offer["spot"], bool) and offer["price_per_hour"] > 0


def test_json_for_named_gpus_has_null_for_missing_precisions_and_their_offers():
    t4, a100 = gpus_json("Tesla_T4", "NVIDIA A100-SXM4-40GB")
    assert t4["id"] == "t4" and t4["peak_tflops"]["bf16"] is None and t4["peak_tflops"]["tf32"] is None
    assert t4["nvml_names"] == ["Tesla T4"] and t4["memory_bytes"] == 16 * 2**30
    assert a100["peak_tflops"]["bf16"] == 312 and a100["memory_bandwidth_gbs"] == 1555
    assert {"aliyun", "aws", "gcp"} <= {o["provider"] for o in t4["offers"]}


def test_min_memory_provider_and_price_sort():
    gpus = gpus_json("--min-memory", "40GB", "--provider", "autodl", "--sort", "price")
    assert gpus and all(g["memory_bytes"] >= 40e9 for g in gpus)
    assert all(o["provider"] == "autodl" for g in gpus for o in g["offers"])
    cheapest = [min(o["price_per_hour"] / o["count"] for o in g["offers"]) for g in gpus]
    assert cheapest == sorted(cheapest)


def test_a_named_gpu_stays_when_the_provider_does_not_offer_it():
    (b200,) = gpus_json("b200", "--provider", "autodl")
    assert b200["id"] == "b200" and b200["offers"] == []


def test_sort_by_memory_and_fp16_put_the_largest_first():
    by_memory = [g["memory_bytes"] for g in gpus_json("--sort", "memory")]
    assert by_memory == sorted(by_memory, reverse=True)
    by_fp16 = [g["peak_tflops"]["fp16"] for g in gpus_json("--sort", "fp16")]
    assert by_fp16 == sorted(by_fp16, reverse=True)


def test_table_output_names_the_gpus_and_their_offers():
    result = CliRunner().invoke(app, ["gpus", "a100-40gb", "4090"])
    assert result.exit_code == 0, result.output
    assert "a100-40gb-sxm4" in result.stdout and "rtx-4090" in result.stdout and "autodl" in result.stdout


def test_user_catalog_offer_shows_up(isolated_config):
    (isolated_config / "catalog.toml").write_text(
        '[[offer]]\nprovider = "mylab"\ngpu = "t4"\nprice_per_hour = 0.9\ncurrency = "CNY"\n'
        'source = "invoice"\nchecked = "2026-12-01"\n'
    )
    (t4,) = gpus_json("t4", "--provider", "mylab")
    assert [(o["provider"], o["price_per_hour"], o["indicative"]) for o in t4["offers"]] == [("mylab", 0.9, False)]


@pytest.mark.parametrize("args, expected", [
    (["a100-90gb"], "unknown GPU 'a100-90gb' (did you mean: a100-80gb-sxm4"),
    (["--provider", "autodll"], "unknown provider 'autodll' (did you mean: autodl?)"),
    (["--sort", "cost"], "unknown sort key 'cost'"),
    (["--min-memory", "lots"], "not a size: 'lots'"),
])
def test_bad_input_exits_2_with_one_line_and_nothing_on_stdout(args, expected):
    result = gpuwise("gpus", *args, "--json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and expected in result.stderr and "Traceback" not in result.stderr


def test_malformed_catalog_file_exits_2_naming_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[offer]]\nprovider = "x"\ngpu = "t4"\nprice_per_hour = -3\ncurrency = "CNY"\n'
                   'source = "s"\nchecked = "2026-12-01"\n')
    result = gpuwise("gpus", "--catalog", str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert f"{bad}: offer[0]: key 'price_per_hour'" in result.stderr


def test_the_memory_column_is_what_the_driver_reports_as_everywhere_else():
    # the table said 24 for an A10 while estimate --gpu all and every fit use 22.5 GiB
    from gpuwise.catalog import load_catalog

    a10 = load_catalog(user_file=False).gpu("a10")
    assert a10.nvml_memory_bytes and a10.nvml_memory_bytes < a10.memory_bytes
    row = next(line for line in gpuwise("gpus", "a10").stdout.splitlines() if line.split()[:1] == ["a10"])
    assert row.split()[1] == f"{a10.visible_memory_bytes / 2**30:.1f}" == "22.5"
