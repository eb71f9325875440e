"""Fine-tuning forms of a real module: freeze, LoRA, and quantized (nf4 / int8) base weights.

``apply_finetune(module, workload)`` is what the tracer calls for any workload with
``finetune != "full"`` or ``quant != "none"``. It works on real, ``meta`` and fake tensors: new
tensors are made with ``new_empty`` from the module's own weights, and the dequantisation kernels
are custom ops whose fake/meta implementation allocates exactly what the CUDA kernel writes.

- freeze: every parameter frozen except the head: the layers registered after the last repeated block
  (a numbered child of a container that holds several of its kind: a transformer's layers, a CNN's
  stages), which are what turns the trunk's output into the model's: an LM's final norm and LM head (the
  tied embedding when tied), a classifier's pooler and classifier, a ViT's final norm and head; where
  nothing with parameters follows the blocks (a VGG's classifier of repeated linears, a segmentation head),
  the last layer with parameters (linear probing). The cheapest fine-tune: no gradients flow into the blocks.
- LoRA: each targeted ``nn.Linear`` of the decoder blocks (default: all of them, routers excluded)
  gets A (r × in) and B (out × r); ``y = base(x) + B(A(x)) · alpha/r``. Adapters are float32 (PEFT
  upcasts adapter weights by default) except under pure fp16/bf16, where they take that dtype.
- QLoRA / nf4: block linears store 4-bit NF4 codes packed two per byte (0.5 B/weight) plus an
  absmax per 64 weights: float32, or with double quantization uint8 + a float32 scale per 256
  absmaxes and one float32 offset (bitsandbytes' layout). int8: int8 weights + a float32 scale per
  output row. Both dequantise to the compute dtype in forward and again in backward (the weight is
  never saved), and save their input for backward as bitsandbytes' autograd functions do.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from gpuwise.trace.autocast import autocast_dtype, pure_dtype
from gpuwise.workload.decoder import check_lora_targets, name_matches
from gpuwise.workload.model import WorkloadError

ROUTER_NAMES = {"gate", "shared_expert_gate", "router"}
NF4_BLOCK, NF4_DQ_BLOCK = 64, 256
# The 16 NF4 levels (QLoRA, Dettmers et al. 2023, appendix E).
NF4_LEVELS = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0,
)


def _is_placeholder(t: torch.Tensor) -> bool:
    """Meta or fake tensors: shapes only, nothing to compute or initialise."""
    from torch._subclasses.fake_tensor import is_fake

    return t.is_meta or is_fake(t)


# ---- dequantisation kernels: real math on real tensors, one output allocation on fake/meta ----

@torch.library.custom_op("gpuwise::dequantize_nf4", mutates_args=())
def dequantize_nf4(packed: torch.Tensor, absmax: torch.Tensor, out_features: int, in_features: int,
                   dtype: torch.dtype) -> torch.Tensor:
    n = out_features * in_features
    codes = torch.stack([packed >> 4, packed & 15], dim=-1).reshape(-1)[:n].long()
    levels = torch.tensor(NF4_LEVELS, dtype=torch.float32, device=packed.device)
    scale = absmax.float().repeat_interleave(NF4_BLOCK)[:n]
    return (levels[codes] * scale).reshape(out_features, in_features).to(dtype)


@dequantize_nf4.register_fake
def _(packed, absmax, out_features, in_features, dtype):
    return packed.new_empty((out_features, in_features), dtype=dtype)


@torch.library.custom_op("gpuwise::dequantize_int8", mutates_args=())
def dequantize_int8(weight: torch.Tensor, row_scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (weight.float() * row_scale[:, None]).to(dtype)


@dequantize_int8.register_fake
def _(weight, row_scale, dtype):
    return weight.new_empty(weight.shape, dtype=dtype)


class _QuantMatmul(torch.autograd.Function):
    """x @ dequant(W)ᵀ without keeping the dequantised W: backward dequantises again."""

    @staticmethod
    def forward(ctx, x, layer):
        w = layer.dequantize(x.dtype)
        ctx.layer = layer
        # bitsandbytes saves the input whenever it needs a gradient (MatMul4Bit / MatMul8bitLt)
        ctx.save_for_backward(x)
        return x @ w.t()

    @staticmethod
    def backward(ctx, grad_out):
        w = ctx.layer.dequantize(grad_out.dtype)
        return grad_out @ w, None


class QuantLinear(nn.Module):
    """A frozen linear layer whose weight is stored quantized (``quant`` = "nf4" or "int8")."""

    def __init__(self, linear: nn.Linear, quant: str, *, double_quant: bool = True) -> None:
        super().__init__()
        self.out_features, self.in_features = linear.out_features, linear.in_features
        self.quant, self.double_quant = quant, double_quant
        w = linear.weight
        n = self.out_features * self.in_features
        if quant == "nf4":
            blocks = math.ceil(n / NF4_BLOCK)
            self.register_buffer("weight_packed", w.new_empty(((n + 1) // 2, 1), dtype=torch.uint8))
            if double_quant:
                self.register_buffer("absmax_q", w.new_empty((blocks,), dtype=torch.uint8))
                self.register_buffer("absmax_scale", w.new_empty((math.ceil(blocks / NF4_DQ_BLOCK),), dtype=torch.float32))
                self.register_buffer("absmax_offset", w.new_empty((), dtype=torch.float32))
            else:
                self.register_buffer("absmax", w.new_empty((blocks,), dtype=torch.float32))
        elif quant == "int8":
            self.register_buffer("weight_int8", w.new_empty(w.shape, dtype=torch.int8))
            self.register_buffer("row_scale", w.new_empty((self.out_features,), dtype=torch.float32))
        else:
            raise WorkloadError(f"unknown quantization {quant!r}; valid: int8, nf4")
        self.bias = nn.Parameter(linear.bias.detach(), requires_grad=False) if linear.bias is not None else None
        if not _is_placeholder(w):
            self._quantize(w.detach())

    def _quantize(self, w: torch.Tensor) -> None:
        with torch.no_grad():
            if self.quant == "int8":
                scale = w.float().abs().amax(dim=1).clamp_min(1e-12) / 127
                self.weight_int8.copy_(torch.round(w.float() / scale[:, None]).clamp(-127, 127).to(torch.int8))
                self.row_scale.copy_(scale)
                return
            flat = w.float().reshape(-1)
            pad = (-flat.numel()) % NF4_BLOCK
            blocks = F.pad(flat, (0, pad)).reshape(-1, NF4_BLOCK)
            absmax = blocks.abs().amax(dim=1).clamp_min(1e-12)
            levels = torch.tensor(NF4_LEVELS, device=w.device)
            codes = (blocks / absmax[:, None]).unsqueeze(-1).sub(levels).abs().argmin(-1).reshape(-1)[: flat.numel()]
            if codes.numel() % 2:
                codes = F.pad(codes, (0, 1))
            pairs = codes.reshape(-1, 2).to(torch.uint8)
            self.weight_packed.copy_((pairs[:, 0] << 4 | pairs[:, 1]).reshape(-1, 1))
            if not self.double_quant:
                self.absmax.copy_(absmax)
                return
            offset = absmax.mean()
            centred = absmax - offset
            pad2 = (-centred.numel()) % NF4_DQ_BLOCK
            groups = F.pad(centred, (0, pad2)).reshape(-1, NF4_DQ_BLOCK)
            scale = groups.abs().amax(dim=1).clamp_min(1e-12) / 127
            q = torch.round(groups / scale[:, None]).clamp(-127, 127) + 128
            self.absmax_q.copy_(q.reshape(-1)[: absmax.numel()].to(torch.uint8))
            self.absmax_scale.copy_(scale)
            self.absmax_offset.copy_(offset)

    def _apply(self, fn, recurse=True):
        # ``module.to(torch.bfloat16)`` must move the quantized storage, not convert it (as
        # bitsandbytes' Params4bit): restore each buffer's dtype after the move
        dtypes = {name: b.dtype for name, b in self._buffers.items() if b is not None}
        super()._apply(fn, recurse)
        for name, dtype in dtypes.items():
            if self._buffers[name].dtype != dtype:
                self._buffers[name] = self._buffers[name].to(dtype)
        return self

    def _absmax(self) -> torch.Tensor:
        if not self.double_quant:
            return self.absmax
        scale = self.absmax_scale.repeat_interleave(NF4_DQ_BLOCK)[: self.absmax_q.numel()]
        return (self.absmax_q.float() - 128) * scale + self.absmax_offset

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        if self.quant == "int8":
            return dequantize_int8(self.weight_int8, self.row_scale, dtype)
        return dequantize_nf4(self.weight_packed, self._absmax(), self.out_features, self.in_features, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _QuantMatmul.apply(x, self) if x.requires_grad else x @ self.dequantize(x.dtype).t()
        return out + self.bias.to(out.dtype) if self.bias is not None else out

    def extra_repr(self) -> str:
        dq = ", double_quant" if self.quant == "nf4" and self.double_quant else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, quant={self.quant}{dq}"


class LoraLinear(nn.Module):
    """``base(x) + B(A(x)) · alpha / r`` with a frozen ``base`` (nn.Linear or QuantLinear)."""

    def __init__(self, base: nn.Module, rank: int, *, alpha: float | None = None, dtype: torch.dtype,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.base = base
        self.dropout = dropout   # PEFT's lora_dropout: applied to the adapter's input only
        ref = next(iter(base.buffers()), None) if isinstance(base, QuantLinear) else base.weight
        self.lora_A = nn.Parameter(ref.new_empty((rank, base.in_features), dtype=dtype))
        self.lora_B = nn.Parameter(ref.new_empty((base.out_features, rank), dtype=dtype))
        self.scaling = (alpha if alpha is not None else 2.0 * rank) / rank
        if not _is_placeholder(ref):
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        if self.dropout and self.training:
            x = F.dropout(x, self.dropout, training=True)   # keeps its mask and its output for A's backward
        update = F.linear(F.linear(x.to(self.lora_A.dtype), self.lora_A), self.lora_B) * self.scaling
        return out + update.to(out.dtype)


def block_linears(module: nn.Module) -> list[tuple[nn.Module, str, str, nn.Linear]]:
    """(parent, attribute, qualified name, layer) of every nn.Linear inside the decoder blocks (a path
    with a numeric ModuleList index), routers excluded; the LM head and embeddings are outside."""
    found = []
    for qual, parent in module.named_modules():
        for attr, child in parent.named_children():
            full = f"{qual}.{attr}" if qual else attr
            # nn.MultiheadAttention reads out_proj.weight directly: leave its projection alone
            if not isinstance(child, nn.Linear) or attr in ROUTER_NAMES or isinstance(parent, nn.MultiheadAttention):
                continue
            if any(part.isdigit() for part in full.split(".")):
                found.append((parent, attr, full, child))
    return found


def _shown_name(qualified: str) -> str:
    """A block linear's leaf name, as --lora-targets matches it; a numbered one (nn.Sequential's ``0``)
    with its parent's name: ``0 (mlp.0)``."""
    parent, _, leaf = qualified.rpartition(".")
    return f"{leaf} ({parent.rpartition('.')[2]}.{leaf})" if leaf.isdigit() and parent else leaf


def _nothing_to_adapt(workload, kind: str) -> str:
    """Why a model without linear layers in repeated blocks cannot take LoRA or a quantization, and what it can
    (--finetune freeze needs no such layers: it trains the head of any model with repeated blocks)."""
    model = getattr(workload, "model", "") or kind
    lora = workload.finetune in ("lora", "qlora")
    what = "LoRA needs" if lora else f"--quant {workload.quant} quantizes"
    # the fix undoes the flag blamed: the fine-tuning method (in serving too: it serves the base model) or the
    # quantization
    fix = "--finetune full" if lora else "--quant none"
    return f"{what} nn.Linear layers inside repeated blocks; {model} has none: use {fix}"


_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def repeated_blocks(module: nn.Module) -> set[str]:
    """Qualified names of the repeated blocks: numbered children of a container that holds two or more
    children of their type (``layers.0`` … of a decoder, ``stages.0`` … of a CNN), and sibling blocks of one
    type (not a bare Sequential/ModuleList/ModuleDict) holding no repeated blocks of their own, whatever their
    names (DenseNet's ``denselayer1`` …, Inception's ``Mixed_5b`` …; not T5's encoder and decoder stacks)."""
    repeats: dict[int, list[str]] = {}

    def repeated_children(parent: nn.Module) -> list[str]:
        if id(parent) not in repeats:
            children = list(parent.named_children())
            numbered = [(attr, child) for attr, child in children if attr.isdigit()]
            blocks = [(attr, child) for attr, child in children
                      if type(child) not in _CONTAINERS and any(True for _ in child.children())
                      and not any(repeated_children(sub) for sub in child.modules())]
            repeats[id(parent)] = [attr for group in (numbered, blocks) for attr, child in group
                                   if [type(c) for _, c in group].count(type(child)) > 1]
        return repeats[id(parent)]

    return {f"{qual}.{attr}" if qual else attr
            for qual, parent in module.named_modules() for attr in repeated_children(parent)}


def head_modules(module: nn.Module) -> list[nn.Module]:
    """The head: the modules with parameters registered after the last repeated block and outside every
    block (an LM's final norm and LM head; a classifier's pooler and classifier; a ViT's final norm and head).
    Where none is (a head registered before the blocks), transformers' output embeddings or what lies
    outside its ``base_model``; else the last module with parameters (a VGG's or a segmentation model's final
    layer: linear probing). Found by structure, never by name."""
    blocks = repeated_blocks(module)
    named = list(module.named_modules())

    def in_block(name: str) -> bool:
        parts = name.split(".")
        return any(".".join(parts[:i]) in blocks for i in range(1, len(parts) + 1))

    def own_parameters(m: nn.Module) -> bool:
        return any(True for _ in m.parameters(recurse=False))

    last = max((i for i, (name, _) in enumerate(named) if in_block(name)), default=None)
    if last is not None:
        head = [m for name, m in named[last + 1:] if not in_block(name) and own_parameters(m)]
        if head:
            return head
    if hasattr(module, "get_output_embeddings") and module.get_output_embeddings() is not None:
        return [module.get_output_embeddings()]
    base = getattr(module, "base_model", module)
    if base is not module:
        inside = {id(p) for p in base.parameters()}
        return [m for m in module.modules()
                if any(id(p) not in inside for p in m.parameters(recurse=False))]
    return [m for _, m in named if own_parameters(m)][-1:]


def _adapter_dtype(workload, ref: torch.Tensor) -> torch.dtype:
    return pure_dtype(workload.precision_value) or torch.float32


def apply_finetune(module: nn.Module, workload, *, double_quant: bool = True, lora_alpha: float | None = None) -> nn.Module:
    """Freeze / LoRA-wrap / quantize ``module`` in place for ``workload`` and return it."""
    ft, quant = workload.finetune, workload.quant
    if ft == "full" and quant == "none":
        return module
    if ft == "full" and workload.is_training:
        raise WorkloadError(f"--finetune full cannot train {quant}-quantized weights; use --finetune lora or qlora")
    linears = block_linears(module)
    if not linears and (ft in ("lora", "qlora") or quant != "none"):
        raise WorkloadError(_nothing_to_adapt(workload, type(module).__name__))
    if ft in ("lora", "qlora"):
        check_lora_targets(tuple(workload.lora_targets), [attr for _, attr, _, _ in linears], workload.model,
                           [_shown_name(qual) for _, _, qual, _ in linears])
    for p in module.parameters():
        p.requires_grad_(False)
    amp_dtype = autocast_dtype(workload.precision_value)
    if amp_dtype is not None:
        # recipes load the frozen base in the compute dtype (torch_dtype=bfloat16) and autocast
        for p in module.parameters():
            if p.is_floating_point():
                p.data = p.data.to(amp_dtype)
    if quant != "none":
        for parent, attr, _, lin in linears:
            setattr(parent, attr, QuantLinear(lin, quant, double_quant=double_quant))
    if ft == "freeze":
        head = head_modules(module)
        if not head:
            raise WorkloadError(f"--finetune freeze trains the layers after the last repeated block; "
                                f"{workload.model or type(module).__name__} has none: use --finetune full")
        for part in head:
            for p in part.parameters(recurse=False):
                if amp_dtype is not None:
                    p.data = p.data.float()      # trained weights keep float32 masters under AMP
                p.requires_grad_(True)
    elif ft in ("lora", "qlora"):
        targets = tuple(workload.lora_targets)
        for parent, attr, _, lin in linears:
            if name_matches(attr, targets):
                base = getattr(parent, attr)
                setattr(parent, attr, LoraLinear(base, workload.lora_rank, alpha=lora_alpha,
                                                 dtype=_adapter_dtype(workload, lin.weight),
                                                 dropout=getattr(workload, "lora_dropout", 0.0)))
    return module
