"""CUDA's autocast op lists, applied to CPU autocast while tracing.

The tracer runs ``torch.autocast("cpu")``, whose lists differ from CUDA's: on CPU ``layer_norm``,
``softmax``, ``pow``, ``exp`` ... stay in half precision; on CUDA they run in fp32 (and their outputs,
saved for backward, are twice as large). Some ops CPU autocast widens to fp32 stay in half on
CUDA (3-D pooling, padding). These kernels, registered for the AutocastCPU dispatch key only for
the duration of a trace, make CPU autocast follow CUDA's lists (ATen/autocast_mode.cpp).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

import torch

_KEYSET = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_HALF = (torch.float16, torch.bfloat16)

# CUDA: these run in fp32 (CPU autocast leaves them in the input's precision).
CUDA_FP32_OPS = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm",
    "group_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim", "cosine_similarity",
    "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss", "multilabel_margin_loss",
    "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits",
    "dist", "pdist", "cdist", "renorm", "logsumexp", "cross_entropy_loss",
    "norm.Scalar", "norm.ScalarOpt_dim",
)
# CUDA: fp32 unless the call passes a dtype ("fp32_set_opt_dtype").
CUDA_FP32_OPT_DTYPE_OPS = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum", "sum", "sum.dim_IntList",
)
# CUDA: these run in half precision too (CPU autocast does not list them).
CUDA_LOWER_OPS = ("addmv", "addr", "mv", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell",
                  "_thnn_fused_gru_cell")
# CPU widens these to fp32, CUDA leaves them in the input's precision.
CPU_ONLY_FP32_OPS = (
    "avg_pool3d", "max_pool3d", "max_pool3d_with_indices", "adaptive_avg_pool3d", "adaptive_max_pool3d",
    "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
    "max_unpool2d", "max_unpool3d", "grid_sampler", "fractional_max_pool2d", "fractional_max_pool3d", "trace",
    "quantile", "quantile.scalar", "nanquantile", "nanquantile.scalar",
)


def _cast(value, dtype: torch.dtype, sources: tuple):
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype in sources:
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype, sources) for v in value)
    return value


def _fp32_kernel(op):
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            return op(*_cast(args, torch.float32, _HALF), **{k: _cast(v, torch.float32, _HALF)
                                                          for k, v in kwargs.items()})
    return kernel


def _fp32_opt_dtype_kernel(op):
    # softmax.int(self, dim, dtype) takes its dtype by position; cumsum/sum/prod by keyword.
    names = [a.name for a in op._schema.arguments]
    position = names.index("dtype") if "dtype" in names else len(names)

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            given = args[position] if len(args) > position else kwargs.get("dtype")
            if given is None and isinstance(args[0], torch.Tensor) and args[0].dtype in _HALF:
                if len(args) > position:
                    args = (*args[:position], torch.float32, *args[position + 1:])
                else:
                    kwargs = {**kwargs, "dtype": torch.float32}
            return op(*args, **kwargs)
    return kernel


def _lower_kernel(op, dtype: torch.dtype):
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            return op(*_cast(args, dtype, (torch.float32,)), **{k: _cast(v, dtype, (torch.float32,))
                                                              for k, v in kwargs.items()})
    return kernel


def _passthrough_kernel(op):
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            return op(*args, **kwargs)
    return kernel


def _overload(name: str):
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    return getattr(packet, overload or "default", None)


@contextlib.contextmanager
def cuda_autocast_lists(dtype: torch.dtype) -> Iterator[list[str]]:
    """While active, CPU autocast to ``dtype`` follows CUDA's op lists. Yields the ops overridden."""
    lib = torch.library.Library("aten", "IMPL")
    done: list[str] = []
    plans = [(CUDA_FP32_OPS, _fp32_kernel), (CUDA_FP32_OPT_DTYPE_OPS, _fp32_opt_dtype_kernel),
             (CUDA_LOWER_OPS, lambda op: _lower_kernel(op, dtype)), (CPU_ONLY_FP32_OPS, _passthrough_kernel)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # "overriding a previously registered kernel" is the point
            for names, make in plans:
                for name in names:
                    op = _overload(name)
                    if op is None:
                        continue
                    try:
                        lib.impl(name, make(op), "AutocastCPU")
                        done.append(name)
                    except RuntimeError:
                        pass   # an op this torch build does not have
        yield done
    finally:
        lib._destroy()


def autocast_dtype(precision) -> torch.dtype | None:
    """The dtype autocast computes in under ``precision`` (``Precision``); None: no autocast."""
    return getattr(torch, precision.compute_dtype) if precision.amp else None


def pure_dtype(precision) -> torch.dtype | None:
    """The dtype weights and inputs are cast to under pure fp16/bf16; None: they stay float32."""
    return getattr(torch, precision.compute_dtype) if precision.pure_half else None
