"""What CUDA does that a trace on CPU fake tensors does not show, as small per-operator rules.

The registry reads like torch/utils/flop_counter.py: ``@register_cuda_rule("aten.convolution")``
over a function ``(op, ctx) -> list[Edit]``. An :class:`Edit` changes the bytes one traced operator
allocates for its outputs, or adds a workspace the CUDA kernel takes for the length of the call.
Things that are not one operator's business (the CUDA context, cuBLAS' per-handle workspace) are
functions of the :class:`CudaStack` below.

Assumptions (documented in docs/memory.md; to be calibrated against benchmarks/measured/):

- Software stack: PyTorch 2.x eager, CUDA 12, cuDNN 9, ``CUDA_MODULE_LOADING=LAZY`` (the default
  since CUDA 11.7 / torch 1.13), so kernels are loaded when first used, not all at start-up.
- cuBLAS workspace: torch allocates it through the caching allocator, once per (handle, stream);
  the size is torch's default ``CUBLAS_WORKSPACE_CONFIG``: ``:4096:8`` = 32 MiB on compute
  capability >= 9.0, ``:4096:2:16:8`` = 8 MiB + 128 KiB before; cuBLASLt shares that allocation
  (TORCH_CUBLASLT_UNIFIED_WORKSPACE, on by default). A training step has two handles: the
  forward runs on the Python thread, the backward on the autograd engine's device thread.
- Scaled-dot-product attention: on every GPU the catalog holds (sm >= 7.0) CUDA picks a fused
  kernel (flash for fp16/bf16 without an arbitrary mask, memory-efficient otherwise, fp32
  included); both keep only the output and a logsumexp for backward. The CPU trace takes the
  math path whenever dropout is on (or the fused CPU kernel declines), which materialises the
  attention matrix, its dropout mask and the dropped matrix: those are removed and a logsumexp
  put in their place.
- cuDNN convolution workspace (``torch.backends.cudnn.benchmark = False``: heuristics): none for
  1x1 and depthwise convolutions (implicit GEMM); a quarter of the larger operand, at most
  256 MiB, for the others. An uncalibrated guess: it only matters when it lands on the peak.
- Dropout (training): what it keeps for backward beside its output is counted at the input's dtype,
  as the CPU trace's noise tensor (``empty_like(x).bernoulli_()``) has it (:func:`dropout_mask_bytes`).
  PyTorch's source says CUDA's ``native_dropout`` keeps a bool mask (1 byte), but the one GPU
  measurement of it we have disagrees: on a V100 (HF Trainer, BERT-large, seq 512, fp32, eager
  attention) batch 4 - batch 1 came 18% above the 1-byte count and within 3% of the dtype-sized one
  (issue 26). The measured, safe side is kept until ``benchmarks/gpu/measure.py`` runs on a card (its BERT-large
  eager batch 1 / batch 4 pair separates the two: 1.05 GiB apart).
- Embedding backward: above 3,072 indices CUDA sorts them and sums each run of equal indices in partial
  sums of 10 rows, holding ``numel / 10 + min(numel, num_weights)`` rows of fp32 (16-bit gradients) or the
  gradient's dtype beside the weight gradient (:func:`embedding_backward_scratch_bytes`; Liger's MI300X
  embedding rows measure it to within 0.2 MiB).
- cuDNN batch norm saves mean and inverse std (C floats each), as the CPU kernel does; its
  reserve space is 0 bytes for plain BN (no fused activation), so no edit is needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from gpuwise.trace import ops as taxonomy
from gpuwise.trace.records import OpRecord, dtype_bytes, tensor_bytes

MIB = 1 << 20


# CUDA context + the cuBLAS / cuDNN kernels a step loads lazily, in MiB, CUDA 12, as nvidia-smi
# shows them for a PyTorch process: estimates without a primary source (docs/memory.md, "Where each
# constant comes from"); memory/uncertainty.py adds their spread to the upper side.
_CONTEXT_MIB = {"pascal": 300, "turing": 300, "volta": 310, "ampere": 360, "ada": 380, "hopper": 500, "blackwell": 560}
_CUBLAS_MODULES_MIB = 64
_CUDNN_MODULES_MIB = 128


@dataclass(frozen=True)
class CudaStack:
    """The GPU side that the rules depend on."""

    arch: str = "ampere"
    compute_capability: tuple[int, int] = (8, 0)
    assumed: bool = True      # no GPU given: an Ampere-class GPU (A100) is assumed

    @classmethod
    def for_gpu(cls, gpu) -> "CudaStack":
        if gpu is None:
            return cls()
        major, _, minor = str(gpu.compute_capability).partition(".")
        return cls(arch=gpu.arch, compute_capability=(int(major), int(minor or 0)), assumed=False)

    @property
    def cublas_workspace_bytes(self) -> int:
        if self.compute_capability >= (9, 0):
            return 8 * 4096 * 1024                       # ":4096:8"
        return 2 * 4096 * 1024 + 8 * 16 * 1024           # ":4096:2:16:8"

    def context_bytes(self, *, uses_cublas: bool, uses_cudnn: bool) -> int:
        mib = _CONTEXT_MIB.get(self.arch, _CONTEXT_MIB["ampere"])
        mib += _CUBLAS_MODULES_MIB if uses_cublas else 0
        mib += _CUDNN_MODULES_MIB if uses_cudnn else 0
        return mib * MIB

    @property
    def fused_attention(self) -> bool:
        # The memory-efficient kernel runs on sm50+; every catalog GPU qualifies.
        return self.compute_capability >= (5, 0)


@dataclass(frozen=True)
class Edit:
    """A change to what operator ``op_index`` (of the measured step) does on CUDA.

    ``output_bytes``: None keeps the traced allocations; otherwise every allocation the operator
    made is resized to it (0 removes them). ``workspace_bytes``: taken and given back during the op.
    """

    op_index: int
    output_bytes: int | None = None
    workspace_bytes: int = 0
    reason: str = ""


@dataclass(frozen=True)
class RuleContext:
    stack: CudaStack
    ops: Sequence[OpRecord]


CudaRule = Callable[[OpRecord, RuleContext], Iterable[Edit]]
_RULES: dict[str, list[CudaRule]] = {}


def register_cuda_rule(*op_names: str) -> Callable[[CudaRule], CudaRule]:
    """Registers a rule for aten ops, by packet ("aten.bmm") or overload ("aten.bmm.default")."""

    def wrap(rule: CudaRule) -> CudaRule:
        for name in op_names:
            _RULES.setdefault(name, []).append(rule)
        return rule

    return wrap


def rules_for(op_name: str) -> list[CudaRule]:
    packet = taxonomy.packet_of(op_name)
    return _RULES.get(op_name, []) + (_RULES.get(packet, []) if packet != op_name else [])


def cuda_edits(ops: Sequence[OpRecord], stack: CudaStack) -> list[Edit]:
    """Every rule's edits over the measured step's operators."""
    ctx = RuleContext(stack, ops)
    edits: list[Edit] = []
    for op in ops:
        for rule in rules_for(op.op):
            edits.extend(rule(op, ctx))
    return edits


# --------------------------------------------------------------------------- libraries
# The op families come from the one taxonomy (trace/ops.py): what cuBLAS runs takes its workspace,
# what cuDNN runs loads its kernels; a forward convolution takes a cuDNN workspace (backward: below).
BLAS_OPS = taxonomy.packets(library=taxonomy.CUBLAS)
CUDNN_OPS = taxonomy.packets(library=taxonomy.CUDNN)
CONV_OPS = frozenset(p for p in taxonomy.packets("conv", library=taxonomy.CUDNN) if not p.endswith("_backward"))
op_packet = taxonomy.packet_of


# --------------------------------------------------------------------------- convolution
CONV_WORKSPACE_CAP_BYTES = 256 * MIB


def _conv_workspace(input_shape, weight_shape, dtype: str, out_bytes: int) -> int:
    if len(weight_shape) < 3 or len(input_shape) < 2:
        return 0
    kernel = math.prod(weight_shape[2:])
    groups = input_shape[1] // max(weight_shape[1], 1)
    if kernel == 1 or groups > 1:
        return 0
    larger = max(tensor_bytes(input_shape, dtype), out_bytes)
    return min(larger // 4, CONV_WORKSPACE_CAP_BYTES)


@register_cuda_rule(*CONV_OPS)
def conv_forward(op: OpRecord, ctx: RuleContext) -> list[Edit]:
    if len(op.input_shapes) < 2 or not op.output_shapes:
        return []
    out_bytes = tensor_bytes(op.output_shapes[0], op.output_dtypes[0])
    ws = _conv_workspace(op.input_shapes[0], op.input_shapes[1], op.input_dtypes[0], out_bytes)
    return [Edit(op.index, workspace_bytes=ws, reason="cuDNN conv workspace")] if ws else []


@register_cuda_rule("aten.convolution_backward")
def conv_backward(op: OpRecord, ctx: RuleContext) -> list[Edit]:
    # inputs: grad_output, input, weight; dgrad and wgrad run one after the other.
    if len(op.input_shapes) < 3:
        return []
    grad_bytes = tensor_bytes(op.input_shapes[0], op.input_dtypes[0])
    ws = _conv_workspace(op.input_shapes[1], op.input_shapes[2], op.input_dtypes[1], grad_bytes)
    return [Edit(op.index, workspace_bytes=ws, reason="cuDNN conv workspace")] if ws else []


# --------------------------------------------------------------------------- embedding backward
# aten/src/ATen/native/cuda/Embedding.cu: with at most this many indices (and no scale_grad_by_freq) one kernel
# writes the weight gradient directly; above it the indices are sorted and EmbeddingBackwardKernel.cu sums the
# gradient rows of each run of equal indices in partial sums of NROWS_PER_THREAD rows first.
EMBEDDING_DIRECT_MAX_INDICES = 3072
EMBEDDING_ROWS_PER_PARTIAL = 10         # NROWS_PER_THREAD
_HALF_DTYPES = ("float16", "bfloat16")


def embedding_backward_scratch_bytes(num_indices: int, num_weights: int, embedding_dim: int, grad_dtype: str,
                                     index_bytes: int = 8) -> int:
    """What CUDA's sorted embedding backward holds beside the weight gradient while it runs:
    ``grad_weight_per_segment`` (numel / 10 + min(numel, num_weights) rows of the embedding dim, at the
    accumulation type: fp32 for 16-bit gradients) and its index arrays (sorted and original order,
    segment offsets, partials per segment and their offsets, partial-segment offsets)."""
    if num_indices <= EMBEDDING_DIRECT_MAX_INDICES:
        return 0
    segments = min(num_indices, num_weights)
    partials = num_indices // EMBEDDING_ROWS_PER_PARTIAL + segments
    acc_bytes = 4 if grad_dtype in _HALF_DTYPES else dtype_bytes(grad_dtype, 4)
    return partials * embedding_dim * acc_bytes + index_bytes * (3 * num_indices + 2 * segments + partials)


@register_cuda_rule("aten.embedding_dense_backward")
def embedding_backward(op: OpRecord, ctx: RuleContext) -> list[Edit]:
    # inputs: grad_output (..., dim), indices; output: the weight gradient (num_weights, dim)
    if len(op.input_shapes) < 2 or not op.output_shapes or len(op.output_shapes[0]) != 2:
        return []
    num_weights, dim = op.output_shapes[0]
    index_bytes = dtype_bytes(op.input_dtypes[1], 8) if len(op.input_dtypes) > 1 else 8
    ws = embedding_backward_scratch_bytes(math.prod(op.input_shapes[1]), num_weights, dim, op.input_dtypes[0],
                                          index_bytes)
    return [Edit(op.index, workspace_bytes=ws, reason="embedding backward's partial sums (CUDA)")] if ws else []


# --------------------------------------------------------------------------- dropout
def dropout_mask_bytes(element_bytes: int) -> int:
    """Bytes a training dropout keeps per element for its backward (beside the dropped output, which
    is counted where a later op saves it): the input's element size, the measured side (module
    docstring, "Dropout"). The one home of this figure: the traced path sizes the CPU's noise tensor
    with it (``dropout_mask``) and the LLM closed form counts LoRA dropout with it."""
    return element_bytes


@register_cuda_rule("aten.bernoulli_")
def dropout_mask(op: OpRecord, ctx: RuleContext) -> list[Edit]:
    """F.dropout in training: the CPU runs ``empty_like(x).bernoulli_(1-p).div_(1-p)`` and ``x * noise``,
    keeping the noise for backward; CUDA runs ``native_dropout``. The ``empty_like`` right before
    ``bernoulli_`` (followed by ``div_`` and ``mul``: the CPU dropout pattern, not a user's own
    drop-path mask) is sized ``dropout_mask_bytes`` an element (today the CPU's own size: no change)."""
    ops = ctx.ops
    i = op.index
    if i < 1 or i + 2 >= len(ops) or not op.output_shapes:
        return []
    before, div, mul = ops[i - 1], ops[i + 1], ops[i + 2]
    if (op_packet(before.op) != "aten.empty_like" or op_packet(div.op) != "aten.div_"
            or op_packet(mul.op) != "aten.mul" or before.output_shapes != op.output_shapes
            or mul.output_shapes != op.output_shapes):
        return []
    if ctx.stack.fused_attention and any(o.op.startswith("aten._safe_softmax") for o in ops[max(i - 5, 0):i]):
        return []   # dropout inside SDPA's math path: the fused kernel keeps no mask (math_sdpa_forward)
    element_bytes = dtype_bytes(before.output_dtypes[0], 4) if before.output_dtypes else 4
    kept = math.prod(op.output_shapes[0]) * dropout_mask_bytes(element_bytes)
    if kept == tensor_bytes(before.output_shapes[0], before.output_dtypes[0] if before.output_dtypes else "float32"):
        return []
    return [Edit(before.index, output_bytes=kept, reason="dropout mask (memory.cuda.dropout_mask_bytes)")]


# --------------------------------------------------------------------------- attention
def _attention_numel(op: OpRecord) -> int:
    return math.prod(op.output_shapes[0]) if op.output_shapes else -1


@register_cuda_rule("aten._safe_softmax")
def math_sdpa_forward(op: OpRecord, ctx: RuleContext) -> list[Edit]:
    """The CPU math SDPA path: scores -> _safe_softmax -> [dropout] -> @ V. CUDA fuses it."""
    if not ctx.stack.fused_attention or not op.output_shapes or len(op.output_shapes[0]) < 2:
        return []
    numel = _attention_numel(op)
    *batch_heads, q_len, _k_len = op.output_shapes[0]
    # The memory-efficient kernel pads logsumexp's query dimension to 32; flash does not.
    lse_bytes = math.prod(batch_heads) * (-(-q_len // 32) * 32) * 4
    edits = [Edit(op.index, output_bytes=lse_bytes, reason="fused SDPA keeps logsumexp, not the attention matrix")]
    ops = ctx.ops
    # Before: the scores bmm (and views); after: the dropout mask and the dropped matrix.
    for j in _attention_run(ops, op.index, -1, numel, 3):
        edits.append(Edit(j, output_bytes=0, reason="fused SDPA"))
    for j in _attention_run(ops, op.index, +1, numel, 8):
        edits.append(Edit(j, output_bytes=0, reason="fused SDPA"))
    return edits


@register_cuda_rule("aten._softmax_backward_data")
def math_sdpa_backward(op: OpRecord, ctx: RuleContext) -> list[Edit]:
    """The backward of the math path: grad of the attention matrix, dropout, softmax. Only when
    the forward was the math SDPA path (a matching _safe_softmax exists in the step)."""
    if not ctx.stack.fused_attention or op.phase != "backward":
        return []
    numel = _attention_numel(op)
    if not any(o.op.startswith("aten._safe_softmax") and _attention_numel(o) == numel for o in ctx.ops):
        return []
    ops = ctx.ops
    edits = [Edit(op.index, output_bytes=0, reason="fused SDPA backward")]
    for j in _attention_run(ops, op.index, -1, numel, 6):
        edits.append(Edit(j, output_bytes=0, reason="fused SDPA backward"))
    for j in _attention_run(ops, op.index, +1, numel, 2):
        edits.append(Edit(j, output_bytes=0, reason="fused SDPA backward"))
    # The fused backward accumulates dQ in fp32: (batch*heads, q_len, head_dim) floats, while it runs.
    *batch_heads, q_len, _ = op.output_shapes[0]
    head_dim = _head_dim_near(ops, op.index)
    edits.append(Edit(op.index, workspace_bytes=math.prod(batch_heads) * q_len * head_dim * 4,
                      reason="fused SDPA backward dQ accumulator"))
    return edits


def _attention_run(ops: Sequence[OpRecord], index: int, step: int, numel: int, limit: int) -> list[int]:
    """Indices of the ops next to ``index`` (going ``step``) whose output is the attention matrix,
    skipping ops without tensor outputs (prim.device ...) and views of other tensors, up to
    ``limit`` of them; stops at the first kernel with another output, or at a BLAS op going
    forward (the ``@ V`` product)."""
    found: list[int] = []
    j = index + step
    while 0 <= j < len(ops) and len(found) < limit:
        o = ops[j]
        j += step
        if not o.output_shapes:
            continue
        if step > 0 and op_packet(o.op) in BLAS_OPS:
            break
        if _attention_numel(o) != numel:
            if o.kernel_count == 0:   # a view: allocates nothing, look past it
                continue
            break
        found.append(o.index)
    return found


def _head_dim_near(ops: Sequence[OpRecord], index: int) -> int:
    """Head dimension from the bmm next to the softmax backward: (B*H, L, D) shapes."""
    for j in range(max(index - 12, 0), min(index + 12, len(ops))):
        o = ops[j]
        if op_packet(o.op) == "aten.bmm" and o.output_shapes and len(o.output_shapes[0]) == 3:
            a, b = o.output_shapes[0][1], o.output_shapes[0][2]
            if a != b:
                return min(a, b)
    return 64
