"""Every quantization a served job is told would make it fit can be launched as told: vLLM quantizes a 16-bit
checkpoint as it loads only to FP8 and bitsandbytes' 4-bit, so it is not told --quant int8 (which `--emit` then
refused: "vLLM cannot serve --quant int8 from ...'s 16-bit checkpoint"); transformers' generate is (LLM.int8()).

Before, from a new user's trial: ``estimate hf:mistralai/Mixtral-8x7B-v0.1 --mode infer --engine vllm --gpu
a100-80gb --seq-len 512 --max-new-tokens 16`` listed "fits with --quant int8"."""

from __future__ import annotations

from gpuwise.launch.server import vllm_quantization_flags
from gpuwise.plan.changes import candidate_remedies
from gpuwise.workload import Workload

MIXTRAL = "hf:mistralai/Mixtral-8x7B-v0.1"


def _serving(engine: str, quant: str = "none") -> Workload:
    return Workload(MIXTRAL, mode="infer", engine=engine, precision="bf16", seq_len=512, max_new_tokens=16,
                    batch_size=1, quant=quant)


def _quant_changes(w: Workload) -> list[str]:
    return [r.change for r in candidate_remedies(w, True) if r.change.startswith("--quant")]


def test_vllm_is_told_only_the_quantizations_it_makes_as_it_loads():
    assert _quant_changes(_serving("vllm")) == ["--quant fp8", "--quant nf4"]


def test_each_quantization_vllm_is_told_gives_a_serve_line():
    told = [r for r in candidate_remedies(_serving("vllm"), True) if r.change.startswith("--quant")]
    assert told and all(vllm_quantization_flags(r.apply(_serving("vllm"))) for r in told)   # no LaunchError


def test_transformers_generate_is_told_8_and_4_bit_weights():
    assert _quant_changes(_serving("hf")) == ["--quant int8", "--quant nf4"]
    assert _quant_changes(_serving("hf", quant="int8")) == ["--quant nf4"]


def test_a_checkpoint_stored_quantized_is_told_no_quantization():
    """DeepSeek-V3 is stored in FP8: vLLM serves it so and cannot load it into bitsandbytes' 4-bit (a review's
    finding: it was told --quant fp8 and --quant nf4, whose --emit would pass --quantization bitsandbytes)."""
    served = Workload("hf:deepseek-ai/DeepSeek-V3", mode="infer", engine="vllm", seq_len=512, max_new_tokens=16,
                      batch_size=1)
    assert _quant_changes(served) == []
