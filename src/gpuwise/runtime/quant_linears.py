"""What a quantized linear layer costs a serving step, from what its library's kernels do (issue 24).

A quantized model is not faster in proportion to its bytes: each library reads its weights through its own
kernels, at their own share of the bandwidth, often with extra kernels, Python calls and host-device
synchronisations around them. Per weight and per call, as the sources say (read in the wheels of
bitsandbytes 0.49.2 and vLLM 0.10.1.1, and transformers 4.57's ``integrations/finegrained_fp8.py``):

nf4 (bitsandbytes ``Linear4bit`` -> ``autograd/_functions.py: matmul_4bit``)
  * one row (``A.numel() == A.shape[-1]``, no gradient: a decode of batch 1) takes the inference fast path,
    ``functional.gemv_4bit`` -> the ``kgemm_4bit_inference_naive`` kernel (``backends/cuda/ops.py``): it
    reads the packed weight, 0.5 B, and a float32 absmax per 64 weights, 4/64 B. With double quantization
    (``compress_statistics``: QLoRA's default, and what vLLM's in-flight quantization uses,
    ``model_loader/bitsandbytes_loader.py``) ``gemv_4bit`` first rebuilds the float32 absmax on every call:
    ``dequantize_blockwise`` (reads 1 B per 64 weights, writes 4) and ``+ offset`` (reads 4, writes 4):
    13/64 B more, two more kernels. The naive kernel gives one warp per output row and spends a shared-
    memory code lookup and two 16-bit multiplies per weight: it reaches ``GEMV_4BIT_BW_EFF`` of the
    datasheet bandwidth (a prior: not measured here).
  * more rows (batch > 1, prefill): ``MatMul4Bit.forward`` = ``functional.dequantize_4bit`` (absmax as
    above; reads 0.5 + 4/64 B and writes the weight in 16 bits, 2 B) then ``torch.nn.functional.linear``
    on that copy, a cuBLAS GEMM that reads the 2 B again: 0.5 + 2 + 2 B a weight (+ 17/64 with double
    quantization), against a 16-bit model's 2.
  (bitsandbytes 0.50 replaced both by a fused ``gemm_4bit`` for small row counts; not modelled.)
int8 (bitsandbytes ``Linear8bitLt`` -> ``MatMul8bitLt.forward``, LLM.int8() with ``threshold`` 6.0, the
  default of transformers' ``llm_int8_threshold`` and of vLLM's ``BitsAndBytesConfig``): the input is cast to
  float16, its outliers found (``abs``, ``>=``, ``.any()`` read back by Python, ``argwhere``: two
  synchronisations), quantized row-wise (``int8_vectorwise_quant``), the outlier columns zeroed; the outlier
  columns of the input and of the int8 weight gathered, the latter dequantized and cast; the int8 GEMM
  (cuBLASLt, int32 out), ``int8_mm_dequant`` to float16, a cast back, and ``addmm`` of the outlier part:
  ``INT8_KERNELS_PER_CALL`` kernels where a 16-bit linear launches one, reading 1 B a weight (+ a float32
  scale per output row). vLLM runs bitsandbytes 8-bit models without CUDA graphs
  (``config/__init__.py: _verify_bnb_config`` sets ``enforce_eager``).
vLLM's bitsandbytes layer (``model_executor/layers/quantization/bitsandbytes.py``) calls ``matmul_4bit`` /
  ``matmul`` once per shard of a fused linear (q, k, v; gate, up) and copies each result into a slice of
  the output: one more kernel per call; its MoE method dequantizes every expert of the layer each forward
  (``BitsAndBytesMoEMethod.apply``).
fp8 (a checkpoint's ``quantization_config``: e4m3 weights, a float32 scale per 128 x 128 block): 1 B a weight.
  vLLM (``quantization/fp8.py``): on GPUs with FP8 tensor cores (compute capability >= 8.9) the activations
  are quantized per 128-wide group (one more kernel) and the GEMM runs at the FP8 rate; below, down to 8.0
  (``Fp8Config.get_min_capability``), weight-only through its FP8 Marlin kernel at the 16-bit rate; under
  8.0 it refuses. transformers' ``FP8Linear``: ``act_quant`` and a Triton block GEMM, then
  ``torch.cuda.synchronize()`` after every linear; it refuses GPUs under 8.9
  (``quantizers/quantizer_finegrained_fp8.py``). With FP8 tensor cores both GEMMs are W8A8: they run at the
  catalog's fp8 peak through the same tensor-core law the 16-bit GEMMs use (``LinearPath.gemm_rate``).
w4a16 / w8a16 (AWQ, GPTQ, compressed-tensors integer weight-only checkpoints; vLLM 0.34 ``auto_awq.py``,
  ``auto_gptq.py``, ``compressed_tensors_wNa16``): vLLM picks its Marlin kernel where ``check_marlin_supported``
  holds (``query_marlin_supported_quant_types``: compute capability 7.5+; group sizes -1, 32, 64, 128): one
  kernel a call that reads the packed weights, their scales and zero points and dequantizes them in registers
  inside a 16-bit tensor-core GEMM (weight-only: the activations stay 16-bit, no extra pass). Below 7.5 AWQ
  refuses (``AutoAWQConfig.get_min_capability`` 75); GPTQ runs from 6.0 (``get_min_capability`` 60) through
  its ExLlama kernel, taken here as the same weight-only GEMM. HF generate's AWQ/GPTQ kernels (autoawq,
  gptqmodel) are taken as the same path: an assumption, said with the time.

Everything here is per weight (bytes) or per call (kernels, eager calls, synchronisations); ``gpuwise.runtime.llm``
turns them into time. The host figures are the eager costs of ``gpuwise.runtime.host``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.runtime.model import RuntimeError_
from gpuwise.workload.decoder import DecoderArch
from gpuwise.workload.storage import FP8_BLOCK, NF4_BLOCK, quant_bytes_per_param

F32 = 4.0
HALF = 2.0
GEMV_4BIT_BW_EFF = 0.40        # kgemm_4bit_inference_naive: share of the datasheet bandwidth (prior, see above)
FP8_TENSOR_CORES_CC = (8, 9)    # vLLM's and transformers' test for FP8 GEMMs (Ada, Hopper and newer)
VLLM_FP8_MIN_CC = (8, 0)        # Fp8Config.get_min_capability: 80 (Marlin weight-only below 8.9)
# vLLM's GPUs: compute capability 7.0+ (its GPU install docs; platforms/cuda.py's supported_dtypes calls below
# 6.0 "GPUs vLLM doesn't support", and Pascal has no tensor cores for its kernels). The 0.34 wheel's own
# kernels (_C_stable_libtorch) are built for sm_75 and newer.
VLLM_MIN_CC = (7, 0)
MARLIN_MIN_CC = (7, 5)          # marlin_utils.query_marlin_supported_quant_types: none below 75
# LLM.int8() inference, per call (MatMul8bitLt.forward with outliers, bitsandbytes 0.45-0.49): cast to fp16,
# abs, >=, any, any(dim=0), argwhere (2), int8_vectorwise_quant, zero the outlier columns (rows > 1 only),
# gather the input's and the weight's outlier columns, dequantize them (2) and cast, int8 GEMM,
# int8_mm_dequant, cast to the model's dtype, addmm.
INT8_KERNELS_PER_CALL = 17
INT8_SYNCS_PER_CALL = 2         # `if outliers.any()` and argwhere's size: the host waits for the GPU
# Outlier feature columns of an input (|x| >= 6): "concentrated in 6 hidden dimensions" from 6.7B parameters on
# (Dettmers et al. 2022, LLM.int8(), section 4). Gathering them from the int8 weight (``CB[:, outlier_cols]``)
# touches one 32-byte sector per column and weight row.
INT8_OUTLIER_COLUMNS = 6
SECTOR_BYTES = 32
# Activation traffic of those kernels per element of the input (rows x in) and of the output (rows x out),
# bytes, with 16-bit activations: cast (2 + 2), abs (2 + 2), >= (2 + 1), two any (1 + 1), quantize (2 + 1);
# int32 GEMM output written and read (4 + 4), dequant's fp16 (2), the cast (2 + 2), addmm's read and write (2 + 2).
INT8_INPUT_BYTES = 16.0
INT8_OUTPUT_BYTES = 20.0
FP8_GROUP = 128                 # vLLM/transformers act_quant: one float32 scale per 128 activations


def _cc(gpu) -> tuple[int, int]:
    major, _, minor = str(gpu.compute_capability).partition(".")
    return int(major), int(minor or 0)


def fp8_refusal(gpu, engine: str) -> str | None:
    """Why ``engine`` cannot serve an FP8 checkpoint on ``gpu`` (None: it can): vLLM from compute capability 8.0
    (weight-only Marlin below 8.9), transformers from 8.9 (sources in the module docstring)."""
    cc = _cc(gpu)
    if engine == "vllm" and cc < VLLM_FP8_MIN_CC:
        return (f"vLLM serves FP8 weights from compute capability 8.0 (Fp8Config); {gpu.id} is "
                f"{gpu.compute_capability}")
    if engine != "vllm" and cc < FP8_TENSOR_CORES_CC:
        return (f"transformers loads FP8 checkpoints on compute capability 8.9+ only; {gpu.id} is "
                f"{gpu.compute_capability} (--engine vllm serves them weight-only through Marlin from 8.0)")
    return None


def vllm_refusal(gpu, engine: str) -> str | None:
    """Why vLLM cannot run on ``gpu`` at all (None: it can, or ``engine`` is not vLLM): compute capability 7.0+."""
    if engine == "vllm" and _cc(gpu) < VLLM_MIN_CC:
        return (f"vLLM runs on compute capability 7.0+; {gpu.id} is {gpu.compute_capability} (--engine hf: "
                "HF generate)")
    return None


def weight_only_refusal(quant: str, gpu, engine: str, scheme=None) -> str | None:
    """Why ``engine`` cannot serve an integer weight-only (AWQ, GPTQ, compressed-tensors) checkpoint on ``gpu``:
    vLLM 0.34 runs all three through Marlin (GPTQ's layer too: ``AutoGPTQLinearMethod`` calls
    ``verify_marlin_supported``), from compute capability 7.5, and a GPTQ checkpoint only when symmetric
    (``AutoGPTQConfig.TYPE_MAP`` holds (4, True) and (8, True)). ``scheme``: the checkpoint's
    (``workload.checkpoint.QuantScheme``; None: not known)."""
    if quant not in ("w4a16", "w8a16") or engine != "vllm":
        return None
    if scheme is not None and scheme.method == "gptq" and scheme.zero_point:
        return ("vLLM serves only symmetric GPTQ checkpoints (this one sets sym false: zero points); --engine hf "
                "runs it")
    if _cc(gpu) < MARLIN_MIN_CC:
        return (f"vLLM serves {quant} weights through Marlin from compute capability {MARLIN_MIN_CC[0]}."
                f"{MARLIN_MIN_CC[1]}; {gpu.id} is {gpu.compute_capability}")
    return None


def quant_refusal(quant: str, gpu, engine: str, scheme=None) -> str | None:
    """Why ``engine`` cannot serve ``quant`` weights on ``gpu`` (None: it can): vLLM's own floor
    (``vllm_refusal``), FP8 checkpoints (``fp8_refusal``), integer weight-only ones (``weight_only_refusal``);
    bitsandbytes runs on every GPU the catalog has."""
    return (vllm_refusal(gpu, engine) or (fp8_refusal(gpu, engine) if quant == "fp8" else None)
            or weight_only_refusal(quant, gpu, engine, scheme))


def fp8_tensor_cores(gpu) -> bool:
    return _cc(gpu) >= FP8_TENSOR_CORES_CC


def vllm_cuda_graphs(quant: str) -> bool:
    """Whether vLLM replays its decode steps as CUDA graphs: not for bitsandbytes 8-bit models
    (``ModelConfig._verify_bnb_config`` sets ``enforce_eager``: LLM.int8()'s outlier test reads the GPU back)."""
    return quant != "int8"


@dataclass(frozen=True)
class LinearPath:
    """How one quantized linear call runs: bytes per weight, and what it launches and calls per call."""

    name: str                  # words for the output: "gemv_4bit", "dequantize_4bit + GEMM", ...
    matmul_bytes: float        # per weight, read by a GEMM at a 16-bit GEMM's share of the bandwidth
    gemv_bytes: float          # per weight, read by bitsandbytes' naive 4-bit GEMV (GEMV_4BIT_BW_EFF)
    stream_bytes: float        # per weight, moved by memory-bound kernels around it (absmax, dequantize)
    kernels: int               # per call (a 16-bit linear: 1)
    extra_eager_calls: int     # kernel-launching eager calls beyond the 16-bit linear's one
    syncs: int = 0             # host waits for the GPU, per call
    input_bytes: float = 0.0   # activation traffic per element of the input (rows x in)
    output_bytes: float = 0.0  # per element of the output (rows x out)
    row_gather_bytes: float = 0.0   # per weight row: LLM.int8()'s gather of the outlier columns
    gemm_rate: str | None = None    # the catalog rate its GEMMs run at (None: the compute precision's)


def linear_path(quant: str, *, rows: int, double_quant: bool, gpu=None, engine: str = "hf",
                group_size: int = 128, zero_point: bool = False) -> LinearPath:
    """The path a ``quant`` linear takes for ``rows`` input rows (sources in the module docstring);
    ``group_size``, ``zero_point``: an integer weight-only checkpoint's (``workload.checkpoint.QuantScheme``)."""
    absmax_prep = (1.0 + F32 + 2 * F32) / NF4_BLOCK if double_quant else 0.0   # dequantize_blockwise, + offset
    absmax_read = F32 / NF4_BLOCK
    prep_kernels = 2 if double_quant else 0
    if quant == "nf4" and rows <= 1:
        return LinearPath("gemv_4bit", 0.0, 0.5 + absmax_read, absmax_prep, 1 + prep_kernels, prep_kernels)
    if quant == "nf4":
        return LinearPath("dequantize_4bit + GEMM", HALF, 0.0, absmax_prep + 0.5 + absmax_read + HALF,
                          2 + prep_kernels, 1 + prep_kernels)
    if quant == "int8":
        kernels = INT8_KERNELS_PER_CALL - (1 if rows <= 1 else 0)    # one row: no outlier columns to zero
        return LinearPath("LLM.int8()", 1.0, 0.0, 0.0, kernels, kernels - 1, INT8_SYNCS_PER_CALL,
                          INT8_INPUT_BYTES, INT8_OUTPUT_BYTES, INT8_OUTLIER_COLUMNS * SECTOR_BYTES)
    if quant == "fp8":
        scales = F32 / (FP8_BLOCK * FP8_BLOCK)
        if gpu is not None and not fp8_tensor_cores(gpu):     # vLLM's weight-only FP8 Marlin GEMM
            return LinearPath("FP8 Marlin (weight-only)", 1.0 + scales, 0.0, 0.0, 1, 0)
        group = F32 / FP8_GROUP
        return LinearPath("FP8 block GEMM", 1.0 + scales, 0.0, 0.0, 2, 1,
                          syncs=0 if engine == "vllm" else 1,       # transformers' FP8Linear synchronizes
                          input_bytes=HALF + 1.0 + group,           # the activation quantization pass
                          gemm_rate="fp8")                          # W8A8 on FP8 tensor cores
    if quant in ("w4a16", "w8a16"):
        stored = quant_bytes_per_param(quant, group_size=group_size, zero_point=zero_point, in_features=1 << 12)
        return LinearPath("Marlin (weight-only)", stored, 0.0, 0.0, 1, 0)
    raise RuntimeError_(f"no quantized path for --quant {quant!r} (one of nf4, int8, fp8, w4a16, w8a16)")


@dataclass(frozen=True)
class QuantLinears:
    """The quantized linears of one forward on one GPU (all layers; routed experts at their touched share)."""

    path: LinearPath
    stored_bytes: float        # their storage (``workload.storage.quant_bytes_per_param``), per GPU
    calls: float               # quantized linear calls (vLLM: one per shard of a fused linear)
    matmul_bytes: float        # read by GEMMs
    gemv_bytes: float          # read by the 4-bit GEMV
    stream_bytes: float        # moved by the kernels around them (dequantization, activation passes)
    extra_kernels: float       # kernels beyond one per call
    extra_eager_calls: float   # eager calls beyond the 16-bit linear's one per call
    syncs: float               # host waits for the GPU


def quant_linears(arch: DecoderArch, quant: str, *, rows: int, tp: int = 1, double_quant: bool = True,
                  expert_share: float = 1.0, gpu=None, engine: str = "hf", scheme=None) -> QuantLinears | None:
    """The quantized block linears of ``arch`` (None for ``quant`` "none") over ``rows`` rows of one GPU of
    ``tp`` tensor-parallel ones. ``expert_share``: the share of routed experts the rows touch; vLLM's
    bitsandbytes MoE dequantizes every expert of a layer each forward. ``scheme``: the checkpoint's
    (``workload.checkpoint.QuantScheme``: group size, zero points, the linears it keeps 16-bit, not counted here)."""
    if quant == "none":
        return None
    group_size = scheme.group_size if scheme is not None else 128
    zero_point = scheme.zero_point if scheme is not None else False
    path = linear_path(quant, rows=rows, double_quant=double_quant, gpu=gpu, engine=engine, group_size=group_size,
                       zero_point=zero_point)
    bnb = quant in ("nf4", "int8")
    weights = stored = calls = touched_stream = acts = 0.0
    for lin in arch.linears:
        n = lin.copies_per_layer * lin.layers * (1.0 - (scheme.kept_share(lin) if scheme is not None else 0.0))
        expert = lin.part == "expert"
        share = expert_share if expert else 1.0
        per = lin.in_features * lin.out_features / tp
        weights += n * share * per
        stored += n * per * quant_bytes_per_param(quant, double_quant=double_quant, in_features=lin.in_features,
                                                  group_size=group_size, zero_point=zero_point)
        # vLLM's fused MoE runs a layer's experts in one kernel per linear; transformers loops over the hit ones
        calls += lin.layers if expert and engine == "vllm" else n * share
        dequantized = 1.0 if expert and engine == "vllm" and bnb else share
        touched_stream += n * dequantized * per * path.stream_bytes
        touched_stream += n * share * lin.out_features * path.row_gather_bytes
        routed_rows = lin.layers * rows * arch.experts_per_token if expert else n * rows   # the top-k picks
        acts += routed_rows * (lin.in_features * path.input_bytes + lin.out_features * path.output_bytes) / tp
    shard_copies = calls if engine == "vllm" and bnb else 0.0     # vLLM: each shard's result copied into `out`
    return QuantLinears(
        path=path, stored_bytes=stored, calls=calls,
        matmul_bytes=weights * path.matmul_bytes, gemv_bytes=weights * path.gemv_bytes,
        stream_bytes=touched_stream + acts, extra_kernels=calls * (path.kernels - 1) + shard_copies,
        extra_eager_calls=calls * path.extra_eager_calls + shard_copies, syncs=calls * path.syncs,
    )
