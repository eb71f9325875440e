"""estimate's fit line and recommend's Best line say the memory a need was judged against in one phrase
(``memory.uncertainty.usable_words``). Was: estimate said "(needs 1.5–1.6 of 12.0 GiB usable) (50% of its memory
kept free)" where recommend said "of 12.0 GiB usable with 50% of its 24.0 GiB kept free" for the same GPU and
--headroom."""

from __future__ import annotations

import re

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.fit import usable_of
from gpuwise.units import format_bytes

MODEL = '''
import torch
from torch import nn

def factory(batch_size: int = 8):
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)), (torch.empty(batch_size, 256),)
'''


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture()
def model_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "tiny.py"
    path.write_text(MODEL)
    return f"{path}:factory"


JUDGED = re.compile(r"of (\S+ GiB usable with [\d.]+% of its \S+ GiB kept free)\)")


@pytest.mark.parametrize("headroom, headroom_fraction", [("50%", 0.5), ("12.5%", 0.125)])
def test_estimate_and_recommend_say_the_usable_memory_in_the_same_words(cli_run, model_file, headroom,
                                                                        headroom_fraction):
    gpu = resolve_gpu(load_catalog(user_file=False), "rtx-4090")
    job = (model_file, "--batch-size", "8", "--headroom", headroom)
    code, out, err = cli_run("recommend", *job, "--samples", "1000", "--gpus", "rtx-4090", "--provider", "autodl",
                             "--max-gpus", "1")
    assert code == 0, err
    judged = JUDGED.search(words(out).split("Best:", 1)[1])
    assert judged, out
    phrase = judged.group(1)
    assert phrase.startswith(f"{format_bytes(usable_of(gpu.visible_memory_bytes, headroom_fraction))} usable")
    code, out, err = cli_run("estimate", *job, "--gpu", "rtx-4090")
    assert code == 0, err
    fit = re.search(r"On rtx-4090: (.*?\))(?: Step time|$)", words(out))
    assert fit, out
    assert fit.group(1).startswith("fits with") and fit.group(1).endswith(f"of {phrase})")
    assert "kept free" not in words(out).replace(phrase, "")     # said once, in the one phrase


def test_usable_words_names_the_share_kept_free_and_the_whole_card():
    from gpuwise.memory.uncertainty import usable_words

    gib = 1 << 30
    assert usable_words(12 * gib, 24 * gib, 0.5) == "12.0 GiB usable with 50% of its 24.0 GiB kept free"
    assert usable_words(21 * gib, 24 * gib, 0.125) == "21.0 GiB usable with 12.5% of its 24.0 GiB kept free"
    assert usable_words(21 * gib) == "21.0 GiB usable"
