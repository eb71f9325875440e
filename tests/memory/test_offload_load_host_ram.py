"""DeepSpeed's ``--offload`` can need more host RAM while loading than in training: every rank builds its own float32
copy of the model before it is partitioned (the ``4 x GPUs`` bytes a parameter of DeepSpeed's
estimate_zero2_model_states_mem_needs). Before, the closed form counted only the steady state (16 bytes a parameter
for Adam) and said nothing of the load: on 8 GPUs Llama-3.1-8B's load takes 32 bytes a parameter, twice that."""

from __future__ import annotations

import os
import re

import pytest

from gpuwise.memory.llm import train_memory
from gpuwise.workload import Workload
from gpuwise.workload.decoder import load_arch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
LLAMA8 = "hf:meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def arch():
    return load_arch(LLAMA8)


def _offloaded(sharding: str, gpus: int) -> Workload:
    return Workload(LLAMA8, finetune="full", seq_len=2048, batch_size=1, grad_checkpointing=True,
                    precision="amp-bf16", sharding=sharding, offload="optimizer", num_gpus=gpus)


def _load_note(mem) -> str | None:
    return next((n for n in mem.notes if "while loading" in n), None)


def test_a_deepspeed_offload_on_8_gpus_says_the_load_s_float32_copies_per_rank(arch):
    mem = train_memory(arch, _offloaded("zero2", 8))
    note = _load_note(mem)
    assert note is not None
    load_gib = float(re.search(r"up to ([\d.]+) GiB", note).group(1))
    assert load_gib == pytest.approx(4 * 8 * arch.param_counts().total / 2**30, abs=0.05)
    assert load_gib > mem.cpu_offload_bytes / 2**30


def test_no_load_note_where_the_steady_state_needs_more_or_fsdp_loads_its_own_way(arch):
    assert _load_note(train_memory(arch, _offloaded("zero2", 2))) is None      # 8 B a parameter < 16
    assert _load_note(train_memory(arch, _offloaded("fsdp", 8))) is None
