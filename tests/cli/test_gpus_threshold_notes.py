"""`gpus --min-memory`: a card just under the threshold (the H100 SXM's 79.6 GiB under 80GiB) is named, not silently
left out, and a threshold no GPU reaches says so with the largest card's memory, in place of an empty table."""

from __future__ import annotations

import json
import math

from gpuwise.catalog import load_catalog, query
from gpuwise.catalog.query import memory_gib_shown, select_gpus
from gpuwise.cli.gpus import _gib

CATALOG = load_catalog(user_file=False)


def words(text: str) -> str:
    return " ".join(text.split())


def test_cards_just_under_min_memory_are_named_with_their_memory(cli_run):
    # before: `gpus --min-memory 80GiB --sort fp16` listed the A100 80GB and left out the H100 SXM and H800 unsaid
    code, out, err = cli_run("gpus", "--min-memory", "80GiB", "--sort", "fp16")
    assert code == 0, err
    notes = [line for line in words(out).split(" GiB: ") if "left out" in line]
    h100 = CATALOG.gpu("h100-sxm")
    assert len(notes) == 1 and f"h100-sxm ({_gib(h100.visible_memory_bytes)} GiB)" in notes[0], out
    near = [g for g in CATALOG.gpus
            if (1 - query.NEAR_MISS_FRACTION) * 80 <= memory_gib_shown(g.visible_memory_bytes) < 80]
    note = notes[0]
    for gpu in near:
        assert f"{gpu.id} ({_gib(gpu.visible_memory_bytes)} GiB)" in note
    keep_gib = math.floor(min(memory_gib_shown(g.visible_memory_bytes) for g in near))
    assert f"--min-memory {keep_gib}GiB keeps them" in note
    kept = {r.gpu.id for r in select_gpus(CATALOG, min_memory_bytes=keep_gib * 2**30)}
    assert {g.id for g in near} <= kept


def test_no_note_where_no_card_is_just_under(cli_run):
    # 24GB is 22.35 GiB: the A10's 22.5 passes; nothing shows 21.9 to 22.35 GiB
    assert not any(21.9 <= memory_gib_shown(g.visible_memory_bytes) < 24e9 / 2**30 for g in CATALOG.gpus)
    code, out, err = cli_run("gpus", "--min-memory", "24GB")
    assert code == 0 and "within" not in out, err


def test_a_threshold_no_gpu_reaches_says_why_with_the_largest_card(cli_run):
    # before: an empty "0 GPUs" table, exit 0, no word of why
    code, out, err = cli_run("gpus", "--min-memory", "1TB")
    assert code == 0, err
    largest = max(CATALOG.gpus, key=lambda g: g.visible_memory_bytes)
    assert (f"no GPU has --min-memory 1TB ({1e12 / 2**30:.1f} GiB): the largest, {largest.id}, has "
            f"{_gib(largest.visible_memory_bytes)} GiB") in words(out)
    assert "0 GPUs" not in out


def test_the_largest_named_is_of_the_gpus_asked_for(cli_run):
    code, out, err = cli_run("gpus", "t4", "a10", "--min-memory", "40GiB")
    assert code == 0, err
    assert "the largest, a10, has 22.5 GiB" in words(out) and "no offer" not in out


def test_json_gives_an_empty_list_and_nothing_else(cli_run):
    code, out, err = cli_run("gpus", "--min-memory", "1TB", "--json")
    assert code == 0 and json.loads(out) == {"gpus": []}, err
