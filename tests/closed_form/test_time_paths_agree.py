"""Issue 24, "one LLM path": the closed form's step time agrees with the traced path's on the same job.

The traced path traces the real transformers module on fake tensors and times each recorded kernel; the
closed form lists the same kernels from the architecture's shapes and times them with the same laws. Both
are asked through ``gpuwise.plan.profile`` (TracedModel, ClosedFormLlmModel) for one forward and backward
(``--optimizer none``: the optimizer step is compared apart, in test_lora_versus_full_step.py), at a
micro-batch large enough that the GPU, not the host, sets the pace.
"""

import json

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import ClosedFormLlmModel, TracedModel
from gpuwise.workload import Workload

pytestmark = pytest.mark.slow

# Llama-like shapes of three widths (hidden, intermediate, heads, KV heads); two layers keep the traces short.
SHAPES = {"h1024": (1024, 2816, 16, 4), "h2048": (2048, 5632, 16, 4), "h4096": (4096, 11008, 32, 8)}
GPUS = ("a100-80gb", "h100-sxm")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    out = {}
    for name, (hidden, inter, heads, kv) in SHAPES.items():
        cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
               "intermediate_size": inter, "num_hidden_layers": 2, "num_attention_heads": heads,
               "num_key_value_heads": kv, "vocab_size": 32000, "tie_word_embeddings": False,
               "max_position_embeddings": 4096}
        path = tmp_path_factory.mktemp(name) / "config.json"
        path.write_text(json.dumps(cfg))
        out[name] = f"hf:{path}"
    return out


def _both(spec: str, gpu, **fields):
    w = Workload(spec, **{**dict(batch_size=8, seq_len=1024, precision="bf16", optimizer="none"), **fields})
    return TracedModel(w).estimate(gpu).time, ClosedFormLlmModel(w).estimate(gpu).time


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_closed_form_step_time_is_the_traced_one_within_10_percent(catalog, specs, shape):
    for gpu_id in GPUS:
        gpu = resolve_gpu(catalog, gpu_id)
        traced, closed = _both(specs[shape], gpu)
        assert traced.regime == "large-batch", (gpu_id, traced.regime)     # the GPU sets the pace
        assert closed.step_time_s == pytest.approx(traced.step_time_s, rel=0.10), (gpu_id, shape)


@pytest.mark.parametrize("fields", [dict(finetune="lora"), dict(grad_checkpointing=True),
                                    dict(finetune="lora", grad_checkpointing=True),
                                    dict(attention="eager", seq_len=512)])
def test_lora_checkpointing_and_eager_attention_agree_too(catalog, specs, fields):
    gpu = resolve_gpu(catalog, "a100-80gb")
    traced, closed = _both(specs["h2048"], gpu, **fields)
    assert closed.step_time_s == pytest.approx(traced.step_time_s, rel=0.10), fields


def test_the_trace_marks_causal_attention_forward_and_backward(specs):
    """transformers calls SDPA with is_causal: the flash kernels of both passes skip the masked blocks, and
    the runtime reads the flag (tests/runtime/test_causal_attention.py); the backward op carried none."""
    from gpuwise.trace import trace_workload

    trace = trace_workload(Workload(specs["h1024"], batch_size=1, seq_len=256, precision="bf16", optimizer="none"))
    attention = [op for op in trace.ops if "scaled_dot_product" in op.op]
    assert {op.phase for op in attention} == {"forward", "backward"}
    assert all(op.attrs.get("is_causal") for op in attention), [(op.op, op.attrs) for op in attention]


@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_both_paths_limit_the_same_unvectorized_kernels(catalog, specs, finetune):
    """RMSNorm's broadcast multiplies and rotary's by cos and sin run without vector loads, at the per-SM limit
    (``runtime.kernels.unvectorized``); on a GPU with much bandwidth per SM clock (B200: 27 bytes) the closed
    form must slow the same kernels the trace does (it was 7% faster than the trace before it did)."""
    gpu = resolve_gpu(catalog, "b200")
    traced, closed = _both(specs["h4096"], gpu, finetune=finetune)
    assert closed.step_time_s == pytest.approx(traced.step_time_s, rel=0.02)
