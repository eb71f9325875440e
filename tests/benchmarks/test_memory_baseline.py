"""The LLM-memory baseline (benchmarks/baselines.py): Transformer Math 101's closed form, checked term by term
against the published per-parameter and per-activation rules on a real architecture, not against itself."""

import pytest

from benchmarks.baselines import transformer_math_bytes
from gpuwise.workload.decoder import load_arch

LLAMA2_7B = "hf:meta-llama/Llama-2-7b-hf"


@pytest.fixture(scope="module")
def arch():
    return load_arch(LLAMA2_7B)


def test_inference_at_16_bit_is_two_bytes_a_parameter_plus_the_kv_cache(arch):
    params = arch.param_counts().total
    kv_per_token = 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * 2   # K and V, 16-bit
    assert transformer_math_bytes(arch, batch=1, tokens=100, training=False) == pytest.approx(
        2 * params + 100 * kv_per_token)


def test_4_bit_weights_are_a_quarter_of_16_bit_ones(arch):
    bf16 = transformer_math_bytes(arch, batch=1, tokens=1, training=False)
    nf4 = transformer_math_bytes(arch, batch=1, tokens=1, training=False, weights="nf4")
    kv = arch.kv_cache_bytes(1, 1, mla_latent=False)
    assert nf4 - kv == pytest.approx((bf16 - kv) / 4)


def test_training_adds_16_bytes_an_adapter_parameter_and_34_sbh_a_layer(arch):
    frozen = transformer_math_bytes(arch, batch=2, tokens=512)
    trained = transformer_math_bytes(arch, batch=2, tokens=512, adapter_params=1_000_000)
    assert trained - frozen == pytest.approx(16 * 1_000_000)
    activations = frozen - 2 * arch.param_counts().total
    assert activations == pytest.approx(34 * 512 * 2 * 4096 * 32)     # s·b·h·L, Llama-2-7B: h 4096, 32 layers
    assert transformer_math_bytes(arch, batch=4, tokens=512) - frozen == pytest.approx(activations)
