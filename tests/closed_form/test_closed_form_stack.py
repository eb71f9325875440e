"""The fine-tuning stack in the closed form: attention, LoRA dropout, how the loss holds the logits.

Expected differences are derived here from the architecture's shapes (Llama-2-7B: 32 layers, 32
heads, hidden 4096, vocabulary 32000), not from gpuwise's output.
"""

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.llm import estimate_llm
from gpuwise.plan.profile import Estimate
from gpuwise.workload import Workload

LLAMA2 = "hf:meta-llama/Llama-2-7b-hf"
LAYERS, HEADS, HIDDEN, VOCAB = 32, 32, 4096, 32000


def _peak(**fields) -> int:
    base = dict(model=LLAMA2, batch_size=2, seq_len=1024, precision="bf16", optimizer="adamw", finetune="lora",
                lora_rank=8, lora_targets=("q", "v"), lora_dropout=0.0)
    return estimate_llm(Workload(**{**base, **fields})).memory.peak_allocated_bytes


def test_eager_attention_keeps_float32_softmax_and_16bit_probabilities_per_head():
    batch, seq = 2, 1024
    # per layer: heads × seq² × (4 B float32 softmax + 2 B cast probabilities) per sequence; no logsumexp
    expected = LAYERS * batch * (HEADS * seq * seq * (4 + 2) - seq * 4 * HEADS)
    assert _peak(attention="eager") - _peak(attention="sdpa") == pytest.approx(expected, rel=0.001)
    assert _peak(attention="flash2") == _peak(attention="sdpa")


@pytest.mark.parametrize("fields", [
    dict(finetune="full", precision="amp-bf16", optimizer="adamw", lora_targets=()),
    dict(finetune="qlora"),
    dict(model="hf:Qwen/Qwen2.5-7B", seq_len=512),
    dict(grad_checkpointing=True),
])
def test_eager_attention_never_uses_less_memory_than_sdpa(fields):
    assert _peak(attention="eager", **fields) >= _peak(attention="sdpa", **fields)


def test_lora_dropout_keeps_a_mask_and_a_copy_of_each_adapted_input():
    tokens = 2 * 1024
    # q and v share the normed input: without dropout the adapters keep it once (2 B); with dropout
    # each keeps a mask (2 B in bf16: memory.cuda.dropout_mask_bytes, the measured side) and its own
    # dropped copy (2 B)
    expected = LAYERS * tokens * (2 * (2 + 2) * HIDDEN - 2 * HIDDEN)
    assert _peak(lora_dropout=0.05) - _peak(lora_dropout=0.0) == pytest.approx(expected, rel=0.001)


def test_chunked_and_fused_cross_entropy_keep_less_than_float32_logits():
    tokens = 2 * 1024
    fp32, chunked, fused = (_peak(logits=m) for m in ("fp32", "chunked", "fused"))
    # fp32: float32 log-softmax saved (4 B) + two float32 gradients in the loss backward (8 B);
    # chunked: 16-bit logits and 16-bit log-softmax (2 + 2 B), one chunk at a time in backward
    assert fp32 - chunked == pytest.approx(tokens * VOCAB * (4 + 8 - 4), rel=0.001)
    # fused (Liger): no logits; the 16-bit hidden-state gradient is kept instead
    assert chunked - fused == pytest.approx(tokens * (4 * VOCAB - 2 * HIDDEN), rel=0.001)


def test_litgpt_llama2_lora_micro_batch_4_that_ran_out_of_memory_is_not_predicted_to_fit():
    """LitGPT resource table row #35: OOM on a 40 GB A100 (it was predicted to fit, 40.9 of 42.9 GB).
    Even at the short end of the longest Alpaca sample's range (1,000 tokens)."""
    a100 = resolve_gpu(load_catalog(user_file=False), "a100-40gb-sxm4")
    w = Workload(LLAMA2, batch_size=4, seq_len=1000, precision="bf16", optimizer="adamw", finetune="lora",
                 lora_rank=8, lora_targets=("q", "v"), logits="chunked", lora_dropout=0.05)
    est = estimate_llm(w, a100)
    assert Estimate(w, a100, 1, est.memory, None).fits is False


def test_quantized_generation_peaks_while_loading_a_vocabulary_matrix():
    w = Workload(LLAMA2, seq_len=10, max_new_tokens=50, batch_size=1, precision="bf16", mode="infer", quant="nf4")
    m = estimate_llm(w).memory
    nf4_dq_bytes = 0.5 + 1 / 64 + 4 / (64 * 256)
    assert m.workspace_bytes == pytest.approx(VOCAB * HIDDEN * (2 + nf4_dq_bytes), rel=0.001)
    assert m.peak_allocated_bytes == m.weights_bytes + m.workspace_bytes
    plain = estimate_llm(w.with_(quant="none")).memory
    assert plain.workspace_bytes < 64 << 20     # no loading transient without quantization


def test_the_footer_says_compile_is_not_modelled_for_a_decoder_llm():
    """The closed form lists eager kernels: --compile changed nothing in an LLM's time while the footer said
    "Assumes PyTorch 2.x torch.compile" (a new user's trial)."""
    from gpuwise.runtime.stack import assumed_stack
    from gpuwise.workload.decoder import is_llm

    compiled = Workload(model=LLAMA2, batch_size=2, seq_len=1024, finetune="lora", compile=True)
    assert is_llm(compiled)
    assert "not modelled" in assumed_stack(compiled, closed_form_llm=True)
    assert assumed_stack(compiled) == "PyTorch 2.x torch.compile with cuDNN"      # traced jobs: compile is modelled


def test_lora_dropout_masks_are_sized_by_the_one_rule(monkeypatch):
    """The closed form takes LoRA dropout's mask from memory.cuda.dropout_mask_bytes, as the traced path does."""
    import gpuwise.memory.cuda as cuda_rules

    tokens = 2 * 1024
    dtype_sized = _peak(lora_dropout=0.05)
    monkeypatch.setattr(cuda_rules, "dropout_mask_bytes", lambda element_bytes: 1)
    assert dtype_sized - _peak(lora_dropout=0.05) == pytest.approx(LAYERS * tokens * 2 * HIDDEN, rel=0.001)


def test_a_trained_embedding_holds_cuda_backward_partial_sums_beside_every_gradient():
    """A full fine-tune whose optimizer takes no parameter-sized temporaries (SGD, Adafactor, 8-bit Adam) peaks at
    the end of backward, where the embedding backward's partial sums (memory.cuda: numel / 10 + min(numel,
    vocabulary) fp32 rows) sit beside every gradient: the closed form had no room for them."""
    tokens = 2 * 4096
    scratch = (tokens // 10 + tokens) * HIDDEN * 4
    for optimizer in ("sgd", "adafactor", "adamw-8bit"):
        est = estimate_llm(Workload(model=LLAMA2, batch_size=2, seq_len=4096, precision="bf16", optimizer=optimizer,
                                    finetune="full", grad_checkpointing=True, logits="chunked")).memory
        assert any("end of backward" in n for n in est.notes), optimizer
        assert est.workspace_bytes >= scratch
    lora = estimate_llm(Workload(model=LLAMA2, batch_size=2, seq_len=4096, precision="bf16", finetune="lora")).memory
    assert not any("end of backward" in n for n in lora.notes)     # a frozen embedding has no weight gradient
