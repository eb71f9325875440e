"""A generating job's traced forward is HF generate's prefill: a model that takes ``logits_to_keep`` computes the
last position's logits only (transformers' generate asks for 1), so its memory holds no batch x prompt x vocab."""

from __future__ import annotations

from gpuwise.trace import cache, trace_workload
from gpuwise.workload import Workload
from gpuwise.workload.specs import resolve_model_spec

BATCH, PROMPT, VOCAB = 2, 128, 1000     # tests/trace/data's tiny configs have a vocabulary of 1,000


def _logit_rows(trace) -> int:
    """The positions the LM head's GEMM projects to the vocabulary (batch x positions)."""
    return max(op.output_shapes[0][0] for op in trace.ops
               if op.phase == "forward" and op.module.endswith("lm_head") and op.op == "aten.mm.default")


def _serving(data_dir, name: str, new_tokens: int) -> Workload:
    return Workload(model=f"hf:{data_dir / name}", batch_size=BATCH, seq_len=PROMPT, mode="infer",
                    max_new_tokens=new_tokens)


def test_generating_gpt2_traces_one_position_of_logits_a_plain_forward_every_one(data_dir):
    plain = trace_workload(_serving(data_dir, "tiny-gpt2.json", 0), use_cache=False)
    prefill = trace_workload(_serving(data_dir, "tiny-gpt2.json", 16), use_cache=False)
    assert _logit_rows(plain) == BATCH * PROMPT
    assert _logit_rows(prefill) == BATCH
    logits_bytes = BATCH * PROMPT * VOCAB * 4
    assert sum(op.flops for op in plain.ops) > sum(op.flops for op in prefill.ops)
    assert sum(op.bytes_written for op in plain.ops) - sum(op.bytes_written for op in prefill.ops) >= logits_bytes


def test_a_decoder_without_logits_to_keep_keeps_every_position_when_generating(data_dir):
    prefill = trace_workload(_serving(data_dir, "tiny-opt.json", 16), use_cache=False)
    assert _logit_rows(prefill) == BATCH * PROMPT


def test_the_cache_keys_the_prefill_apart_from_a_forward_and_shares_it_across_answer_lengths(data_dir):
    spec = resolve_model_spec(f"hf:{data_dir / 'tiny-gpt2.json'}")
    short, long = (cache.trace_key(_serving(data_dir, "tiny-gpt2.json", n), spec) for n in (16, 512))
    assert short == long
    assert cache.trace_key(_serving(data_dir, "tiny-gpt2.json", 0), spec) != short
