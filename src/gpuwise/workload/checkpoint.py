"""How a checkpoint stores its weights, from its config's ``quantization_config`` (issue 24).

A served model is loaded as its checkpoint is, and both engines read the format from the config:

* ``"fp8"`` (DeepSeek-V3's: float8 e4m3 weights, a float32 scale per 128 x 128 block, ``weight_block_size``):
  vLLM's ``Fp8Config.from_config``, transformers' ``FineGrainedFP8Config`` (``quantizers/auto.py``).
* ``"bitsandbytes"`` (``load_in_4bit`` nf4 / ``load_in_8bit`` LLM.int8()).
* ``"awq"`` (AutoAWQ: ``bits``/``w_bit``, ``group_size``/``q_group_size``, ``zero_point``, ``modules_to_not_convert``;
  vLLM 0.34 ``quantization/auto_awq.py``: Marlin from compute capability 7.5, ``check_marlin_supported``) and
  ``"gptq"`` (``bits``, ``group_size``, ``sym``, ``desc_act``, ``lm_head``; ``auto_gptq.py``): packed integer
  weights with a 16-bit scale per group of ``group_size`` inputs (and a packed zero point per group where
  asymmetric: AWQ's ``zero_point``, GPTQ's ``sym`` false), weight-only (``w4a16``, ``w8a16``).
* ``"compressed-tensors"`` (llm-compressor): ``config_groups``' ``weights`` (``num_bits``, ``type`` int or float,
  ``strategy``, ``group_size``, ``symmetric``) and ``input_activations``, and an ``ignore`` list. Integer
  weight-only groups are ``w4a16``/``w8a16`` (vLLM's ``CompressedTensorsWNA16``: Marlin); float 8-bit weights
  with float 8-bit activations are ``fp8`` (W8A8). Other schemes (int8 W8A8, FP8 weight-only, FP4, 2:4
  sparsity, mixed groups) are refused by name: the closed form does not describe their kernels.

Modules a config keeps unquantized (AWQ's ``modules_to_not_convert``, matched as substrings as vLLM's
``is_layer_skipped(match_mode="substring")``; compressed-tensors' ``ignore``, names or ``re:`` patterns) stay
16-bit; so do the embedding and the LM head unless the config quantizes the head (GPTQ's ``lm_head``, AWQ's
``lm_head``). Training recipes start from 16-bit weights, so only serving (``--mode infer``) takes the
checkpoint's quantization, and only when no ``--quant`` is asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from gpuwise.workload.decoder_configs import text_config
from gpuwise.workload.errors import WorkloadError
from gpuwise.workload.llm_config import try_load_decoder_config
from gpuwise.workload.storage import FP8_BLOCK, WEIGHT_ONLY_QUANTS

FP8_FORMATS = ("e4m3", "float8_e4m3fn", "")      # what vLLM's Fp8Config serves (e5m2 checkpoints are rare)
DEFAULT_GROUP_SIZE = 128                          # AutoAWQ's and GPTQ's default q_group_size
# where a linear of each part sits in a HF decoder layer: what an ignore list's names and patterns are matched on
_PART_PATHS = {"attn": "self_attn", "mlp": "mlp", "expert": "mlp.experts.0", "shared": "mlp.shared_expert"}


def _quantization_config(cfg: dict | None) -> dict:
    """A config's ``quantization_config``, at its top level or in its ``text_config`` (multimodal wrappers);
    {} where none is given."""
    if not cfg:
        return {}
    qc = cfg.get("quantization_config") or text_config(cfg).get("quantization_config")
    return qc if isinstance(qc, dict) else {}


@dataclass(frozen=True)
class QuantScheme:
    """A checkpoint's quantized weights: ``quant`` (the ``--quant`` it stands for), the config's ``method``,
    integer weight-only formats' ``group_size`` (-1: one scale per output row) and ``zero_point``, FP8's scale
    block, the modules kept 16-bit (``ignore``) and whether the LM head is quantized too."""

    quant: str
    method: str = ""
    group_size: int = DEFAULT_GROUP_SIZE
    zero_point: bool = False
    fp8_block: tuple[int, int] | None = None
    ignore: tuple[str, ...] = ()
    substring_ignore: bool = True       # AWQ/GPTQ: an entry inside the module's name; compressed-tensors: exact/re:
    lm_head: bool = False

    def kept_share(self, lin) -> float:
        """The share of a block linear's layers (``decoder.LinearSpec``) this checkpoint keeps unquantized."""
        if not self.ignore:
            return 0.0
        prefix = _PART_PATHS.get(lin.part, lin.part)
        kept = sum(1 for layer in range(lin.layers)
                   if any(self._ignores(entry, f"model.layers.{layer}.{prefix}.{lin.name}") for entry in self.ignore))
        return kept / lin.layers if lin.layers else 0.0

    def _ignores(self, entry: str, path: str) -> bool:
        if entry.startswith("re:"):
            return re.match(entry[3:], path) is not None
        if self.substring_ignore:
            return entry in path
        return path == entry or path.endswith("." + entry)


NONE = QuantScheme("none")


def _group(value) -> int:
    group = int(value) if value is not None else DEFAULT_GROUP_SIZE
    return -1 if group <= 0 else group


def _weight_only(bits, method: str) -> str:
    quant = {4: "w4a16", 8: "w8a16"}.get(int(bits) if bits is not None else 4)
    if quant is None:
        raise WorkloadError(f"a {method} checkpoint with {bits}-bit weights is not modelled (4- and 8-bit are); "
                            "the closed form would cost it as 16-bit")
    return quant


def _compressed_tensors(qc: dict) -> QuantScheme:
    if qc.get("sparsity_config") or str(qc.get("format", "")).lower() == "marlin-24":
        raise WorkloadError("a compressed-tensors checkpoint with 2:4 sparsity is not modelled (its sparse Marlin "
                            "kernels read half the weights): the closed form would cost it as dense")
    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict)]
    schemes = {(str((g.get("weights") or {}).get("type", "int")), (g.get("weights") or {}).get("num_bits"),
                bool(g.get("input_activations"))) for g in groups}
    if len(schemes) != 1:
        raise WorkloadError(f"a compressed-tensors checkpoint with {len(schemes) or 'no'} weight schemes is not "
                            "modelled (one config group is)")
    weights, acts = groups[0].get("weights") or {}, groups[0].get("input_activations") or {}
    kind, bits = str(weights.get("type", "int")).lower(), weights.get("num_bits")
    ignore = tuple(str(e) for e in qc.get("ignore") or ())
    # vLLM's CompressedTensorsConfig quantizes LinearBase layers only: its LM head (ParallelLMHead) stays 16-bit
    if (kind == "float" and bits == 8 and acts and str(acts.get("type", "")).lower() == "float"
            and acts.get("num_bits", 8) == 8):
        block = weights.get("block_structure")
        return QuantScheme("fp8", "compressed-tensors", fp8_block=(int(block[0]), int(block[1])) if block else None,
                           ignore=ignore, substring_ignore=False)
    if kind == "int" and not acts:
        group = _group(weights.get("group_size") if weights.get("strategy", "group") == "group" else -1)
        return QuantScheme(_weight_only(bits, "compressed-tensors"), "compressed-tensors", group_size=group,
                           zero_point=not weights.get("symmetric", True), ignore=ignore, substring_ignore=False)
    act = f"{acts.get('type')} {acts.get('num_bits')}-bit activations" if acts else "16-bit activations"
    raise WorkloadError(f"a compressed-tensors checkpoint of {kind} {bits}-bit weights with {act} is not modelled "
                        "(int 4/8-bit weight-only and FP8 W8A8 are)")


def quant_scheme(cfg: dict | None) -> QuantScheme:
    """A config's ``quantization_config`` as a ``QuantScheme`` (sources in the module docstring); ``NONE`` where
    none is given. WorkloadError for a method or format the closed form does not describe: never costed as
    16-bit weights in silence."""
    qc = _quantization_config(cfg)
    method = str(qc.get("quant_method", "")).lower()
    if not method:
        return NONE
    if method == "fp8":
        if str(qc.get("fmt", "")).lower() not in FP8_FORMATS:
            raise WorkloadError(f"an FP8 checkpoint in {qc.get('fmt')} is not modelled (e4m3 is)")
        block = qc.get("weight_block_size")
        # vLLM's Fp8Config: ignored_layers, else modules_to_not_convert, matched by exact name (match_mode="exact")
        ignore = qc.get("ignored_layers") or qc.get("modules_to_not_convert") or ()
        return QuantScheme("fp8", method, fp8_block=(int(block[0]), int(block[1])) if block and len(block) == 2
                           else None, ignore=tuple(ignore), substring_ignore=False)
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            kind = str(qc.get("bnb_4bit_quant_type", "nf4")).lower()
            if kind != "nf4":
                raise WorkloadError(f"a bitsandbytes checkpoint of {kind} 4-bit weights is not modelled (nf4 is)")
            return QuantScheme("nf4", method)
        if qc.get("load_in_8bit"):
            return QuantScheme("int8", method)
        raise WorkloadError("a bitsandbytes quantization_config with neither load_in_4bit nor load_in_8bit set "
                            "quantizes nothing gpuwise can tell")
    if method == "awq":
        bits = qc.get("bits", qc.get("w_bit"))
        return QuantScheme(_weight_only(bits, "AWQ"), method, group_size=_group(qc.get("group_size",
                           qc.get("q_group_size"))), zero_point=bool(qc.get("zero_point", True)),
                           ignore=tuple(qc.get("modules_to_not_convert") or ()), lm_head=bool(qc.get("lm_head")))
    if method == "gptq":
        return QuantScheme(_weight_only(qc.get("bits"), "GPTQ"), method, group_size=_group(qc.get("group_size")),
                           zero_point=not qc.get("sym", True),
                           ignore=tuple(qc.get("modules_to_not_convert") or ()), lm_head=bool(qc.get("lm_head")))
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    raise WorkloadError(f"the checkpoint's quantization_config quant_method {method!r} is not modelled (fp8, "
                        "bitsandbytes, awq, gptq and compressed-tensors are); the closed form would cost it as "
                        "16-bit weights")


def checkpoint_quant(cfg: dict | None) -> str:
    """The ``--quant`` a checkpoint's ``quantization_config`` stands for (``quant_scheme``): "fp8", "nf4",
    "int8" (bitsandbytes), "w4a16"/"w8a16" (AWQ, GPTQ, compressed-tensors integer weight-only), else "none"."""
    return quant_scheme(cfg).quant


def fp8_block(cfg: dict | None) -> tuple[int, int] | None:
    """The FP8 scales' block (rows, columns) a checkpoint gives (None: per tensor or channel, or no FP8 config)."""
    return quant_scheme(cfg).fp8_block


@dataclass(frozen=True)
class StoredWeights:
    """How a model spec's checkpoint stores its weights: its ``checkpoint_quant``, ``fp8_block`` and scheme."""

    quant: str
    fp8_block: tuple[int, int] | None
    scheme: QuantScheme = NONE


@lru_cache(maxsize=64)
def stored_weights(model: str) -> StoredWeights:
    """The checkpoint's storage of a model spec, its config read once per spec (a plan asks per GPU)."""
    scheme = quant_scheme(try_load_decoder_config(model))
    return StoredWeights(scheme.quant, scheme.fp8_block, scheme)


def stored_quant(model: str) -> str:
    """``checkpoint_quant`` of a model spec's config (``stored_weights``)."""
    return stored_weights(model).quant


# --quant -> vLLM's --quantization for a 16-bit checkpoint quantized as it loads (vLLM 0.10's
# ``model_executor/layers/quantization``); None: vLLM cannot (bitsandbytes' in-flight quantization is 4-bit only:
# LLM.int8() weights load from a checkpoint stored in 8 bits)
VLLM_QUANTIZATION: dict[str, str | None] = {"nf4": "bitsandbytes", "fp8": "fp8", "int8": None}


def vllm_quantizes_on_load(quant: str) -> bool:
    """Whether ``vllm serve --quantization ...`` turns a 16-bit checkpoint into ``quant`` weights as it loads."""
    return VLLM_QUANTIZATION.get(quant) is not None


def served_scheme(model: str, quant: str) -> QuantScheme:
    """How ``quant`` weights of ``model`` are stored: the checkpoint's own scheme where it is stored so, else
    ``quant`` with the defaults (a 16-bit checkpoint quantized while loading)."""
    stored = stored_weights(model)
    return stored.scheme if stored.quant == quant else QuantScheme(quant)


def served_quant(model: str, *, mode: str, quant: str = "none") -> str:
    """The quantization a job's weights run in: ``quant`` where asked; serving a checkpoint that says its own
    (``checkpoint_quant``), that one; otherwise none. The weight-only integer formats are a checkpoint's
    (AWQ, GPTQ, compressed-tensors): asked of a checkpoint that does not store them, WorkloadError."""
    if quant in WEIGHT_ONLY_QUANTS and stored_quant(model) != quant:
        raise WorkloadError(f"--quant {quant} is how an AWQ, GPTQ or compressed-tensors checkpoint stores its weights; "
                            f"{model} does not (its quantization_config says {stored_quant(model)}): serve such a "
                            "checkpoint, or use --quant int8, nf4 or fp8")
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
    scheme = stored.scheme
    kept = f"; kept 16-bit: {', '.join(scheme.ignore)}" if scheme.ignore else ""
    if quant == "fp8":
        block = stored.fp8_block
        scales = f"a float32 scale per {block[0]} x {block[1]} block" if block else "per-tensor or per-channel scales"
        if block and block != (FP8_BLOCK, FP8_BLOCK):
            scales += f" (counted as {FP8_BLOCK} x {FP8_BLOCK})"
        return (f"weights in FP8 (e4m3) as the checkpoint stores them (its quantization_config, {scheme.method}): "
                f"1 B a weight + {scales}{kept}; vLLM serves them from compute capability 8.0 (weight-only through "
                "Marlin below 8.9), transformers from 8.9 (FP8 tensor cores)")
    if quant in WEIGHT_ONLY_QUANTS:
        group = "per output row" if scheme.group_size < 0 else f"per {scheme.group_size} inputs"
        zeros = " and a packed zero point" if scheme.zero_point else ""
        head = "quantized" if scheme.lm_head else "16-bit"
        return (f"weights in {quant[1]}-bit integers as the checkpoint stores them ({scheme.method}): a 16-bit scale"
                f"{zeros} {group}{kept}; embedding 16-bit, LM head {head}; vLLM runs them through Marlin "
                "(weight-only: dequantized inside a 16-bit GEMM) from compute capability 7.5")
    return f"weights in {quant} as the checkpoint stores them (its quantization_config: bitsandbytes)"
