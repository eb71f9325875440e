"""How a checkpoint stores its weights, from its config's ``quantization_config`` (issue 24).

A served model is loaded as its checkpoint is: DeepSeek-V3's ships float8 e4m3 weights with a float32 scale
per 128 x 128 block (``{"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}``), which vLLM
(``model_executor/layers/quantization/fp8.py``, ``Fp8Config.from_config``) and transformers
(``quantizers/auto.py``: ``"fp8"`` -> ``FineGrainedFP8Config``) both read from the config and serve as such;
a bitsandbytes checkpoint (``"quant_method": "bitsandbytes"``, ``load_in_4bit`` / ``load_in_8bit``) holds nf4
or LLM.int8() weights. Training recipes start from 16-bit weights, so only serving (``--mode infer``) takes the
checkpoint's quantization, and only when no ``--quant`` is asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuwise.workload.decoder_configs import text_config
from gpuwise.workload.llm_config import try_load_decoder_config
from gpuwise.workload.storage import FP8_BLOCK

FP8_FORMATS = ("e4m3", "float8_e4m3fn", "")      # what vLLM's Fp8Config serves (e5m2 checkpoints are rare)


def _quantization_config(cfg: dict | None) -> dict:
    """A config's ``quantization_config``, at its top level or in its ``text_config`` (multimodal wrappers);
    {} where none is given."""
    if not cfg:
        return {}
    qc = cfg.get("quantization_config") or text_config(cfg).get("quantization_config")
    return qc if isinstance(qc, dict) else {}


def checkpoint_quant(cfg: dict | None) -> str:
    """The ``--quant`` a checkpoint's ``quantization_config`` stands for: "fp8" (float8 e4m3, per-block or
    per-tensor scales), "nf4" or "int8" (bitsandbytes), else "none" (none given, or a method the closed form
    does not describe: GPTQ, AWQ, ...)."""
    qc = _quantization_config(cfg)
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8" and str(qc.get("fmt", "")).lower() in FP8_FORMATS:
        return "fp8"
    if method == "bitsandbytes":
        if qc.get("load_in_4bit") and str(qc.get("bnb_4bit_quant_type", "nf4")).lower() == "nf4":
            return "nf4"
        if qc.get("load_in_8bit"):
            return "int8"
    return "none"


def fp8_block(cfg: dict | None) -> tuple[int, int] | None:
    """The FP8 scales' block (rows, columns) a checkpoint gives (None: per tensor, or no FP8 config)."""
    block = _quantization_config(cfg).get("weight_block_size")
    return (int(block[0]), int(block[1])) if block and len(block) == 2 else None


@dataclass(frozen=True)
class StoredWeights:
    """How a model spec's checkpoint stores its weights: its ``checkpoint_quant`` and ``fp8_block``."""

    quant: str
    fp8_block: tuple[int, int] | None


@lru_cache(maxsize=64)
def stored_weights(model: str) -> StoredWeights:
    """The checkpoint's storage of a model spec, its config read once per spec (a plan asks per GPU)."""
    cfg = try_load_decoder_config(model)
    return StoredWeights(checkpoint_quant(cfg), fp8_block(cfg))


def stored_quant(model: str) -> str:
    """``checkpoint_quant`` of a model spec's config (``stored_weights``)."""
    return stored_weights(model).quant


def served_quant(model: str, *, mode: str, quant: str = "none") -> str:
    """The quantization a job's weights run in: ``quant`` where asked; serving a checkpoint that says its own
    (``checkpoint_quant``), that one; otherwise none."""
    if quant != "none" or mode != "infer":
        return quant
    return stored_quant(model)


def checkpoint_note(model: str, quant: str) -> str | None:
    """What the output says where the weights' quantization comes from the checkpoint (None: it does not)."""
    if quant == "none":
        return None
    stored = stored_weights(model)
    if stored.quant != quant:
        return None
    if quant == "fp8":
        block = stored.fp8_block
        scales = f"a float32 scale per {block[0]} x {block[1]} block" if block else "per-tensor scales"
        if block and block != (FP8_BLOCK, FP8_BLOCK):
            scales += f" (counted as {FP8_BLOCK} x {FP8_BLOCK})"
        return (f"weights in FP8 (e4m3) as the checkpoint stores them (its quantization_config): 1 B a weight + "
                f"{scales}; vLLM serves them from compute capability 8.0 (weight-only through Marlin below 8.9), "
                "transformers from 8.9 (FP8 tensor cores)")
    return f"weights in {quant} as the checkpoint stores them (its quantization_config: bitsandbytes)"
