"""The `vllm serve` line a server's --emit refusal names: the flag vLLM needs to quantize a 16-bit checkpoint as
it loads (--quantization fp8 was missing for --quant fp8), none where the checkpoint stores the weights so, and no
line for what vLLM cannot do on load (LLM.int8() from a 16-bit checkpoint: its bitsandbytes path is 4-bit only)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuwise.launch import LaunchError, check_emit, is_server, server_emit_refusal
from gpuwise.launch.server import vllm_quantization_flags
from gpuwise.workload import Workload

L8 = "hf:meta-llama/Llama-3.1-8B"
DS = "hf:deepseek-ai/DeepSeek-V3"


def _served(model, quant, **kw):
    return Workload(model, mode="infer", quant=quant, engine="vllm", seq_len=1024, max_new_tokens=256,
                    **kw).with_default_precision()


def _refusal(workload, count=2, replicas=1):
    best = SimpleNamespace(count=count, gpu="h100-sxm", provider="aws", replicas=replicas)
    return server_emit_refusal(SimpleNamespace(workload=workload, best=best, fallback_precision={}), "torchrun")


@pytest.mark.parametrize("model, quant, flags", [
    (L8, "none", []),
    (L8, "nf4", ["--quantization bitsandbytes"]),
    (L8, "fp8", ["--quantization fp8"]),
    (DS, "fp8", []),                        # stored in FP8: vLLM reads its quantization_config
])
def test_the_quantization_flag_is_what_vllm_needs_to_load_the_checkpoint(model, quant, flags):
    assert vllm_quantization_flags(_served(model, quant)) == flags


def test_fp8_on_a_16_bit_checkpoint_names_the_flag_in_the_line():
    line = _refusal(_served(L8, "fp8"))
    assert "`vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 2 --max-model-len 1280 --quantization fp8`" in line


def test_int8_on_a_16_bit_checkpoint_is_refused_with_what_to_serve_instead(monkeypatch):
    with pytest.raises(LaunchError, match="4-bit only"):
        vllm_quantization_flags(_served(L8, "int8"))
    line = _refusal(_served(L8, "int8"))
    assert "vllm serve" not in line and "stored in 8 bits" in line and "--quant nf4" in line
    # a checkpoint stored in 8 bits (bitsandbytes' load_in_8bit) is served as it is
    import gpuwise.launch.server as server

    monkeypatch.setattr(server, "stored_quant", lambda model: "int8")
    assert vllm_quantization_flags(_served(L8, "int8")) == []
    assert "`vllm serve meta-llama/Llama-3.1-8B" in _refusal(_served(L8, "int8"))


def test_a_server_needs_no_command_to_be_refused_and_a_training_job_does():
    served, trained = _served(L8, "none"), Workload(L8)
    assert is_server(served) and not is_server(trained)
    assert is_server(Workload(L8, mode="infer", max_new_tokens=16, request_rate_per_s=1.0))
    check_emit("torchrun", None, server=True)
    with pytest.raises(LaunchError, match="--emit needs --command"):
        check_emit("torchrun", None)
    with pytest.raises(LaunchError, match="unknown target"):
        check_emit("slurm", None, server=True)
