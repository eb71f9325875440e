"""Real transformers models (tiny configs) traced through their data-dependent paths."""

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

from trace_helpers import peak_live_bytes

ACTIVATIONS = {"activations"}


def _trace(data_dir, name, **kw):
    return trace_workload(Workload(model=f"hf:{data_dir / name}", **kw))


@pytest.fixture(scope="module")
def bert(data_dir):
    return _trace(data_dir, "tiny-bert.json", batch_size=2, seq_len=64)


def test_bert_gets_through_the_attention_mask_shortcut(bert):
    assert any("_local_scalar_dense" in note for note in bert.notes)
    attention = [op for op in bert.ops if op.attrs.get("attention")]
    assert [op.phase for op in attention].count("forward") == 2   # one fused kernel per layer
    assert bert.flops > 0 and {"forward", "backward", "optimizer"} <= {op.phase for op in bert.ops}


def test_gpt2_like_decoder_is_traced_as_a_causal_lm(data_dir):
    trace = _trace(data_dir, "tiny-gpt2.json", batch_size=2, seq_len=128)
    forward_attention = [op for op in trace.ops if op.attrs.get("attention") and op.phase == "forward"]
    assert len(forward_attention) == 4 and all(op.attrs["is_causal"] for op in forward_attention)
    logits = [op for op in trace.ops if op.phase == "forward" and op.output_shapes[:1] == ((256, 1000),)]
    assert logits, "the LM head projects every token to the vocabulary"


def test_vit_traces_with_its_patch_convolution(data_dir):
    trace = _trace(data_dir, "tiny-vit.json", batch_size=2)
    conv = next(op for op in trace.ops if op.op == "aten.convolution.default")
    assert conv.input_shapes[0] == (2, 3, 64, 64) and conv.attrs["stride"] == (16, 16)


@pytest.mark.parametrize("precision, half", [("amp-fp16", "float16"), ("amp-bf16", "bfloat16")])
def test_amp_runs_matmuls_in_half_and_layer_norm_in_fp32_as_cuda_autocast(data_dir, precision, half):
    trace = _trace(data_dir, "tiny-bert.json", batch_size=2, seq_len=64, precision=precision)
    matmuls = [op for op in trace.ops if op.phase == "forward" and op.op in ("aten.addmm.default", "aten.mm.default")]
    assert matmuls and all(op.output_dtypes == (half,) for op in matmuls)
    norms = [op for op in trace.ops if op.phase == "forward" and "layer_norm" in op.op]
    assert norms and all(op.output_dtypes[0] == "float32" for op in norms)
    attention = [op for op in trace.ops if op.phase == "forward" and op.attrs.get("attention")]
    assert all(op.op == "aten._scaled_dot_product_flash_attention.default" for op in attention)
    # AMP keeps fp32 master weights.
    weights = sum(e.size_bytes for e in trace.events if e.category == "weights" and e.kind == "alloc")
    assert weights >= 4 * trace.param_count


def test_amp_fp16_unscales_gradients_with_grad_scaler(data_dir):
    trace = _trace(data_dir, "tiny-bert.json", batch_size=2, seq_len=32, precision="amp-fp16")
    ops = {op.op for op in trace.ops if op.phase == "optimizer"}
    assert "aten._amp_foreach_non_finite_check_and_unscale_.default" in ops
    assert "aten._amp_update_scale_.default" in ops


def test_pure_bf16_halves_the_weights(data_dir, bert):
    trace = _trace(data_dir, "tiny-bert.json", batch_size=2, seq_len=64, precision="bf16")
    weights = sum(e.size_bytes for e in trace.events if e.category == "weights" and e.kind == "alloc")
    assert weights < 2.1 * trace.param_count


def test_gradient_checkpointing_lowers_peak_activations(data_dir):
    plain = _trace(data_dir, "tiny-gpt2.json", batch_size=4, seq_len=256, optimizer="sgd")
    ckpt = _trace(data_dir, "tiny-gpt2.json", batch_size=4, seq_len=256, optimizer="sgd", grad_checkpointing=True)
    assert peak_live_bytes(ckpt.events, ACTIVATIONS) < 0.7 * peak_live_bytes(plain.events, ACTIVATIONS)
    assert any("checkpointing" in n for n in ckpt.notes)


def test_inference_of_a_causal_lm_keeps_no_autograd_state(data_dir):
    trace = _trace(data_dir, "tiny-gpt2.json", batch_size=2, seq_len=128, mode="infer")
    assert {op.phase for op in trace.ops} == {"forward"}
    assert not any(e.category in ("gradients", "optimizer") for e in trace.events)


def test_layer_drop_on_fake_random_draws_keeps_every_layer(data_dir):
    # OPT skips a layer when torch.rand([]) < layerdrop: fake data must not skip any.
    trace = _trace(data_dir, "tiny-opt.json", batch_size=2, seq_len=32, optimizer="sgd")
    forward_attention = [op for op in trace.ops if op.attrs.get("attention") and op.phase == "forward"]
    assert len(forward_attention) == 3
    assert any("random draw" in note for note in trace.notes)


def test_eager_attention_runs_the_models_own_eager_code_under_amp(data_dir):
    """Issue 26: BERT's eager attention adds a float32 mask to half scores, so under autocast its softmax,
    dropout and dropped probabilities stay float32 until the second matmul casts them; the stand-in
    (transformers' Llama-style ``softmax(dtype=float32).to(half)``) dropped them in half precision."""
    trace = _trace(data_dir, "tiny-bert.json", batch_size=2, seq_len=32, precision="amp-fp16", attention="eager")
    scores = (2, 4, 32, 32)
    noise = [op for op in trace.ops if op.phase == "forward" and op.op.startswith("aten.bernoulli_")
             and op.output_shapes[:1] == (scores,)]
    assert len(noise) == 2 and all(op.output_dtypes[0] == "float32" for op in noise)   # one per layer
    assert not any(op.attrs.get("attention") for op in trace.ops)                       # no fused kernel
    assert any("model's own eager code" in note for note in trace.notes)
