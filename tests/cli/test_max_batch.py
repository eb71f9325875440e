"""`estimate --max-batch` answers its question: the table, fit and time of the largest batch that fits."""

from __future__ import annotations

import pytest

from gpuwise.cli.app import main

JOB = ["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "512", "--grad-checkpointing",
       "--gpu", "rtx-4090", "--max-batch"]


def test_the_answer_is_the_largest_batch_that_fits_and_the_next_one_does_not(cli_json):
    # before: the batch-32 table (does not fit), "none of the changes tried makes it fit", then
    # "Largest batch that fits: N": three answers to a question asked once
    out = cli_json([*JOB, "--batch-size", "32", "--json"])
    largest = out["max_batch_size"]
    assert out["requested_batch_size"] == 32 and 1 <= largest < 32
    assert out["workload"]["batch_size"] == largest and out["fits"] is True and out["changes_that_fit"] == []
    assert cli_json([*JOB[:-1], "--batch-size", str(largest + 1), "--json"])["fits"] is False


def test_the_text_leads_with_the_largest_batch_and_shows_no_remedies(capsys):
    with pytest.raises(SystemExit) as done:
        main([*JOB, "--batch-size", "32"])
    out = capsys.readouterr().out
    assert done.value.code in (0, None)
    first, second = out.splitlines()[:2]
    assert first.startswith("Largest batch that fits rtx-4090: ") and first.endswith("(asked: 32)")
    largest = int(first.split(": ")[1].split()[0])
    assert f"batch {largest}," in second
    assert "does not fit" not in out and "none of the changes" not in out and "fits with --" not in out


def test_when_not_even_batch_one_fits_it_says_so_and_names_the_changes(cli_json):
    out = cli_json(["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "full", "--seq-len", "512", "--gpu", "rtx-4090",
                    "--max-batch", "--batch-size", "4", "--json"])
    assert out["max_batch_size"] == 0 and out["workload"]["batch_size"] == 4 and out["fits"] is False
    assert out["changes_that_fit"]
