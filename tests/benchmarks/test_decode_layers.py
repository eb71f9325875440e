"""benchmarks/decode_layers.py: a layer's share of decode_step, taken from the product's own parts."""

import pytest

from benchmarks.decode_layers import (GEMMS, Layer, check_gemm_shapes, one_layer_arch, post_attn_norm, predict,
                                      roofline_s)
from gpuwise.catalog import load_catalog
from gpuwise.runtime.calibration import load_calibration
from gpuwise.runtime.llm import DECODE_BW_EFF, VLLM_KERNELS_PER_LAYER


class _Shape:
    def __init__(self, **kw):
        self.__dict__.update(kw)


LLAMA_7B = _Shape(n_embd=4096, n_expanded_embd=11008, n_head=32, n_kv_head=32, vocab_size=32768, gated_mlp=True)
PHI_2 = _Shape(n_embd=2560, n_expanded_embd=10240, n_head=32, n_kv_head=32, vocab_size=51200, gated_mlp=False)


@pytest.fixture(scope="module")
def h100():
    return next(g for g in load_catalog(user_file=False).gpus if g.id == "h100-sxm")


@pytest.mark.parametrize("model, shape", [("meta-llama/Llama-2-7b-hf", LLAMA_7B), ("microsoft/phi-2", PHI_2)])
@pytest.mark.parametrize("tokens", [1, 256])
def test_a_layer_is_decode_steps_parts_without_the_head(model, shape, tokens, h100):
    arch = one_layer_arch(model, shape)
    layer = predict(arch, h100, 1, tokens, load_calibration())   # asserts the parts reproduce decode_step
    linears = sum(lin.params for lin in arch.linears)
    assert linears * 2 <= layer.layer_bytes < linears * 2 * 1.001   # the linears' fp16 bytes and the norms
    assert layer.mem_s == pytest.approx(layer.layer_bytes / (h100.memory_bandwidth_gbs * 1e9 * DECODE_BW_EFF))
    assert layer.time_s(VLLM_KERNELS_PER_LAYER - 1) == pytest.approx(max(layer.mem_s, layer.flop_s) + 8 * 4e-6)
    assert post_attn_norm(arch) == (model != "microsoft/phi-2")


def test_tensor_parallel_shards_the_weights_and_the_gemms(h100):
    arch = one_layer_arch("meta-llama/Llama-2-7b-hf", LLAMA_7B)
    one, eight = (predict(arch, h100, tp, 16, load_calibration()) for tp in (1, 8))
    assert eight.layer_bytes == pytest.approx(one.layer_bytes / 8)
    assert eight.flop_s < one.flop_s


def test_vidur_shapes_are_checked_and_the_roofline_counts_add_as_often_as_measured():
    arch = one_layer_arch("meta-llama/Llama-2-7b-hf", LLAMA_7B)
    h, i = 4096, 11008
    ops = {"attn_pre_proj": _Shape(m=4, k=h, n=3 * h // 2), "attn_post_proj": _Shape(m=4, k=h // 2, n=h),
           "mlp_up_proj": _Shape(m=4, k=h, n=i), "mlp_down_proj": _Shape(m=4, k=i // 2, n=h)}
    check_gemm_shapes(ops, arch, 2, 4)
    with pytest.raises(AssertionError):
        check_gemm_shapes(ops, arch, 1, 4)
    add = {"add": None}
    once, twice = (roofline_s(add, arch, 1, 4, 1e12, 1e15, n) for n in (1, 2))
    assert twice == pytest.approx(2 * once) and once == pytest.approx(2 * 3 * 4 * h / 1e12)
    assert set(GEMMS) == set(ops) and Layer(1.0, 2.0, 0.5, 0.0).time_s(2) == 3.0
