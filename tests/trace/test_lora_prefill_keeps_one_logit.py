"""A LoRA or QLoRA model's traced prefill keeps one position's logits, as a full model's does.

PEFT's ``PeftModel.forward`` has no ``logits_to_keep`` parameter, so a trace of a PeftModel would compute every
position's logits although HF generate (run by PEFT on the base model) asks for one. gpuwise adapts the model in
place (``trace.peft.apply_finetune``): the traced module stays the transformers class, whose forward takes it."""

from __future__ import annotations

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

BATCH, PROMPT = 2, 128


def _lm_head_rows(trace) -> int:
    """The positions the LM head's GEMM projects to the vocabulary (batch x positions)."""
    return max(op.output_shapes[0][0] for op in trace.ops
               if op.phase == "forward" and op.module.endswith("lm_head") and op.op == "aten.mm.default")


@pytest.mark.parametrize("finetune", ["lora", "qlora"])
def test_an_adapted_llama_generating_traces_one_position_of_logits(data_dir, finetune):
    job = Workload(model=f"hf:{data_dir / 'tiny-llama.json'}", batch_size=BATCH, seq_len=PROMPT, mode="infer",
                   max_new_tokens=16, finetune=finetune)
    assert _lm_head_rows(trace_workload(job, use_cache=False)) == BATCH
