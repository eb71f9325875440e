"""Piped or at 80 columns, no table silently drops or cuts a column: real subprocesses, as a user pipes them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

# Closed form (no trace): fast, and its options are excluded for several different reasons.
QWEN_14B_ZERO3 = ["recommend", "hf:Qwen/Qwen2.5-14B", "--precision", "bf16", "--seq-len", "2048", "--batch-size", "1",
                  "--grad-checkpointing", "--sharding", "zero3", "--steps", "1000", "--provider", "autodl",
                  "--no-remedies"]


def gpuwise(*args: str, columns: int | None = 80) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    result = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                            timeout=300, env=env)  # stdout is a pipe, as in `gpuwise ... | cat`
    assert result.returncode == 0, result.stderr
    return result


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def qwen_json():
    return json.loads(gpuwise(*QWEN_14B_ZERO3, "--all", "--json").stdout)


@pytest.mark.parametrize("columns", [80, None])
def test_piped_recommend_at_80_columns_keeps_every_reason_and_count_intact(qwen_json, columns):
    out = gpuwise(*QWEN_14B_ZERO3, "--all", columns=columns).stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "why not" in out and "…" not in out
    flat = words(out)
    assert qwen_json["options"]
    for option in qwen_json["options"]:
        label = option["gpu"] + (f" ×{option['count']}" if option["count"] > 1 else "")
        assert re.search(rf"(^|\s){re.escape(label)}\s", out, re.M), f"{label} missing or cut"
        if option["excluded_because"]:
            assert words(option["excluded_because"]) in flat, f"reason of {label} missing or cut"
    rows = [line for line in out.splitlines() if " autodl " in line]
    assert len(rows) == len(qwen_json["options"])
    assert not any(re.search(r"×\s*$|×\s+autodl", row) for row in rows), "a GPU count was cut off"


def test_an_80_column_table_that_cannot_hold_the_reasons_numbers_them_as_footnotes(qwen_json):
    out = gpuwise(*QWEN_14B_ZERO3).stdout
    notes = dict(re.findall(r"^(\[\d+\]) (.+)$", out, re.M))
    assert notes, out
    for number in notes:
        assert f"see {number}" in out
    # Every row that refers to a footnote is an option that was excluded (its reason is the footnote,
    # of which the first line is matched: a long one wraps)
    reasons = [words(o["excluded_because"]) for o in qwen_json["options"] if o["excluded_because"]]
    assert all(any(r.startswith(words(first_line)) for r in reasons) for first_line in notes.values()), notes


def test_a_wide_terminal_shows_the_reasons_in_the_table_without_footnotes(qwen_json):
    out = gpuwise(*QWEN_14B_ZERO3, columns=200).stdout
    assert not re.search(r"^\[\d+\] ", out, re.M) and "see [" not in out
    excluded = [o["excluded_because"] for o in qwen_json["options"] if o["excluded_because"]]
    assert any(reason in out for reason in excluded)


def test_piped_gpus_table_fits_80_columns_and_cuts_no_id_or_price():
    out = gpuwise("gpus", "--provider", "autodl").stdout
    assert max(len(line) for line in out.splitlines()) <= 80
    gpus = json.loads(gpuwise("gpus", "--provider", "autodl", "--json").stdout)["gpus"]
    assert {"rtx-4090", "a100-40gb-pcie"} <= {g["id"] for g in gpus}
    for gpu in gpus:
        assert re.search(rf"^ ?{re.escape(gpu['id'])}\*? ", out, re.M), gpu["id"]
        cheapest = min(o["price_per_hour"] / o["count"] for o in gpu["offers"])
        assert f"¥{cheapest:,.2f} autodl" in out


def test_a_table_wider_than_the_console_wraps_its_cells_instead_of_cropping_them(monkeypatch):
    from rich.console import Console
    from rich.table import Table

    from gpuwise.cli import common

    narrow = Console(width=24, record=True, file=open(os.devnull, "w"))
    monkeypatch.setattr(common, "console", narrow)
    table = Table(box=None, pad_edge=False)
    table.add_column("gpu", no_wrap=True)
    table.add_column("price", no_wrap=True)
    table.add_row("a800-80gb-pcie ×8", "¥47.84 autodl (spot)")
    narrow.print(common.fit_to_console(table))
    lines = narrow.export_text().splitlines()
    assert max(map(len, lines)) <= 24 and "…" not in "".join(lines)
    # a GPU id is read whole (was "a800-80gb-pc / ie ×8" at 80 columns: "a100-80gb-s / xm4"); the other cells wrap
    assert lines[1].startswith("a800-80gb-pcie ×8 ")
    right = "".join(line[18:] for line in lines[1:]).replace(" ", "")
    assert "¥47.84autodl(spot)" in right  # every character there, in order, only wrapped


def test_command_help_is_reflowed_not_cut_at_the_docstring_s_line_breaks():
    # typer keeps a docstring's single line breaks: at 80 columns `report --help` read
    # "...output: peak/p95 memory" / "needed, busy share..." with half-empty lines between.
    out = gpuwise("report", "--help").stdout
    lines = [line.strip() for line in out.splitlines()]
    para = [line for line in lines[lines.index(next(x for x in lines if x.startswith("Reads a gpuwise"))):]]
    para = para[:para.index("")]
    assert all(len(line) >= 60 for line in para[:-1]), para   # every line but the last is filled
    assert "peak/p95 memory needed" in words(out)


def test_reflow_keeps_paragraphs_list_items_and_indented_examples():
    from gpuwise.cli.app import reflow

    doc = """First line
    continues here.

    Second paragraph
    joined.
    - item one
    - item two
      $ gpuwise example
    """
    assert reflow(doc) == ("First line continues here.\n\nSecond paragraph joined.\n- item one\n- item two\n"
                           "  $ gpuwise example")


def test_recommend_names_the_value_pick_in_words_when_it_is_not_the_best():
    # the table marked a row "value" (stacked under "fastest") and no line said what it meant
    out = gpuwise("recommend", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--precision", "bf16", "--seq-len", "1024",
                  "--batch-size", "4", "--steps", "2000", "--provider", "autodl", "--no-remedies").stdout
    lines = out.splitlines()
    # in its own line, or in the fastest's where they are one option (a stack of marks read as empty rows)
    assert any(line.startswith(("Value (least cost × time): ", "Fastest and best value (least cost × time): "))
               for line in lines), out
    assert not any(line.strip() in ("fastest", "value") for line in lines), out
    assert any(line.startswith("batch: micro-batch per GPU") and len(line.rstrip()) <= 80 for line in lines), out


def test_estimate_on_every_gpu_keeps_each_id_whole_at_80_columns():
    # the table cut ids at 80 columns: "a100-80gb-sx…", "rtx-pro-6000…" (not a name a user can type)
    from gpuwise.catalog import load_catalog

    out = gpuwise("estimate", "torchvision:resnet18", "--batch-size", "2", "--image-size", "64", "--gpu", "all").stdout
    assert "…" not in out
    table = out[out.index("Every GPU in the catalog"):]
    first_cells = {line.split()[0] for line in table.splitlines()[3:] if line.strip()}
    assert {g.id for g in load_catalog(user_file=False).gpus} <= first_cells


@pytest.mark.parametrize("args, option", [
    (["gpus", "--min-memory", "80"], "--min-memory"),
    (["advise", "tests/fixtures/does-not-matter.csv", "--checkpoint-size", "5"], "--checkpoint-size"),
])
def test_a_size_without_a_unit_is_refused_not_read_as_bytes(args, option):
    # `gpus --min-memory 80` listed all 48 GPUs: 80 bytes
    result = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [f"gpuwise: error: {option}: '{args[-1]}' has no unit: "
                                                  f"write {args[-1]}GB or {args[-1]}GiB"]


def test_one_gpu_is_one_gpu_not_1_gpus():
    assert gpuwise("gpus", "t4").stdout.splitlines()[0].strip() == "1 GPU"


def test_the_layout_note_is_for_image_models_only():
    # "channels-first unless --channels-last" was printed under an LLM's estimate
    llm = gpuwise("estimate", "hf:Qwen/Qwen2.5-0.5B", "--batch-size", "1", "--seq-len", "128").stdout
    assert "channels" not in llm and "Assumes PyTorch 2.x eager mode" in llm
    cnn = gpuwise("estimate", "torchvision:resnet18", "--batch-size", "2", "--image-size", "64").stdout
    assert "channels-first unless --channels-last" in words(cnn)


def test_recommend_prices_no_job_for_an_option_that_does_not_fit():
    # the table showed "12.1 h ¥9.40" for an RTX A4000 that is out of memory at batch 1
    out = gpuwise("recommend", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "1024", "--batch-size", "4",
                  "--steps", "2000", "--provider", "autodl", "--gpus", "rtx-a4000,h800", "--max-gpus", "1",
                  "--all").stdout
    row = next(line for line in out.splitlines() if "rtx-a4000" in line and "autodl" in line)
    assert row.split()[-4:-2] == ["-", "-"] and "¥" not in row, out


def test_a_bandwidth_bound_option_reads_bandwidth_not_memory():
    """Was (issue 27): 'memory' in the bound column read as out-of-memory where it meant DRAM bandwidth."""
    serve = ["recommend", "hf:Qwen/Qwen2.5-7B", "--mode", "infer", "--seq-len", "512", "--max-new-tokens", "128",
             "--batch-size", "1", "--provider", "autodl", "--no-remedies", "--all"]
    options = json.loads(gpuwise(*serve, "--json").stdout)["options"]
    assert "memory" in {o["bound"] for o in options if o["fits"]}      # the JSON keeps the runtime's names
    rows = [line.split() for line in gpuwise(*serve, columns=200).stdout.splitlines() if " autodl " in line]
    assert any(row[-1] == "bandwidth" for row in rows) and not any(row[-1] == "memory" for row in rows)
