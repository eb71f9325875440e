"""recommend's Best line and its remedies say the memory a need was judged against: the GPU's usable memory, less
--headroom, as estimate's fit line does. Was: "needs 7.9 GiB of 24.0 GiB" (the whole RTX 4090) at --headroom 50%,
where the fit was judged against 12.0 GiB."""

from __future__ import annotations

import re

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.fit import usable_of
from gpuwise.units import format_bytes

NEEDS = re.compile(r"needs (\d+\.\d GiB)(?: each)? of (\d+\.\d GiB) usable with (\d+)% of its (\d+\.\d GiB) kept free")


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def gib(text: str) -> float:
    return float(text.split()[0])


def assert_judged_against_usable(line: str, gpu, headroom_fraction: float) -> None:
    judged = NEEDS.search(line)
    assert judged, line
    need, usable, kept_percent, whole = judged.groups()
    assert whole == format_bytes(gpu.visible_memory_bytes)
    assert usable == format_bytes(usable_of(gpu.visible_memory_bytes, headroom_fraction))
    assert int(kept_percent) == round(headroom_fraction * 100)
    assert gib(need) <= gib(usable) < gib(whole)


def test_best_line_says_the_usable_memory_at_a_large_headroom_as_estimate_does(cli_run, catalog):
    gpu = resolve_gpu(catalog, "rtx-4090")
    job = ("torchvision:resnet18", "--batch-size", "64", "--headroom", "50%")
    code, out, err = cli_run("recommend", *job, "--samples", "10000", "--gpus", "rtx-4090", "--provider", "autodl",
                             "--max-gpus", "1")
    assert code == 0, err
    best = words(out).split("Best:", 1)[1].split("note:", 1)[0]
    assert_judged_against_usable(best, gpu, 0.5)
    code, out, err = cli_run("estimate", *job, "--gpu", "rtx-4090")
    assert code == 0, err
    usable, whole = (format_bytes(usable_of(gpu.visible_memory_bytes, 0.5)), format_bytes(gpu.visible_memory_bytes))
    assert f"of {usable} usable with 50% of its {whole} kept free" in words(out)


def test_remedies_say_the_usable_memory_they_were_judged_against(cli_run, catalog):
    gpu = resolve_gpu(catalog, "rtx-a5000")
    code, out, err = cli_run("recommend", "hf:Qwen/Qwen2.5-14B", "--precision", "bf16", "--seq-len", "2048",
                             "--batch-size", "1", "--grad-checkpointing", "--sharding", "zero3", "--steps", "1000",
                             "--provider", "autodl", "--gpus", "rtx-a5000", "--max-gpus", "1", "--headroom", "20%")
    assert code == 0, err
    remedies = words(out).split("To make the job fit:")[1:]
    assert remedies, out
    for remedy in remedies:
        assert_judged_against_usable(remedy, gpu, 0.2)
