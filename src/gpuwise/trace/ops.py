"""One op taxonomy: which kind of GPU kernel each aten operator becomes, and which CUDA library runs it.

A registry in the manner of ``torch.utils.flop_counter``: ``register_class("matmul", "aten.mm", ...)``
files op packets under a class, optionally with the library that runs them on CUDA (``library=CUBLAS``
or ``CUDNN``). Every part reads operators through here: the time model's classes (runtime/classify.py),
the CUDA memory rules' cuBLAS/cuDNN families (memory/cuda.py), the packet of an overload name. Adding
an operator is one entry; a second list of op names elsewhere is a taxonomy that can disagree
(tests/core/test_one_home.py).

``VIEW`` ops launch no kernel and move no bytes (a view, a shape query, an allocation).
"""

from __future__ import annotations

CLASSES = (
    "matmul", "conv", "attention", "rnn", "norm", "elementwise", "reduction",
    "embedding", "optimizer", "copy", "other",
)
VIEW = "view"   # not a class of the result: no kernel, no time on the GPU
CUBLAS = "cublas"
CUDNN = "cudnn"

_CLASS: dict[str, str] = {}
_LIBRARY: dict[str, str] = {}


def register_class(cls: str, *packets: str, library: str | None = None) -> None:
    """File aten op packets ("aten.mm", without the overload) under one class (and CUDA library)."""
    if cls not in CLASSES and cls != VIEW:
        raise ValueError(f"unknown op class {cls!r}")
    if library not in (None, CUBLAS, CUDNN):
        raise ValueError(f"unknown CUDA library {library!r}")
    for packet in packets:
        _CLASS[packet] = cls
        if library is not None:
            _LIBRARY[packet] = library


def packet_of(op_name: str) -> str:
    """"aten.mm.default" -> "aten.mm"; names without an overload are returned as they are."""
    parts = op_name.split(".")
    if len(parts) >= 3:
        return ".".join(parts[:2])
    return op_name


def classify_name(op_name: str) -> str:
    """The class of an op by name (an overload or a packet): one of CLASSES, or VIEW."""
    if op_name.startswith(("profiler.", "prim.")):
        return VIEW   # profiler ranges and shape prims: bookkeeping, no kernel
    packet = packet_of(op_name)
    if packet in _CLASS:
        return _CLASS[packet]
    name = packet.split(".", 1)[-1]
    # Families named by prefix: each new foreach / fused-optimizer / attention variant is one of them.
    if name.startswith(("_foreach_", "_fused_adam", "_fused_sgd", "_fused_adagrad")):
        return "optimizer"
    if "scaled_dot_product" in name or name.startswith(("_flash_attention", "_efficient_attention",
                                                          "_cudnn_attention")):
        return "attention"
    if name.endswith(("_norm", "_norm_backward")) or "batch_norm" in name or "layer_norm" in name:
        return "norm"
    return "other"


def library_of(op_name: str) -> str | None:
    """The CUDA library that runs the op (CUBLAS, CUDNN) or None (PyTorch's own kernels)."""
    return _LIBRARY.get(packet_of(op_name))


def packets(cls: str | None = None, *, library: str | None = None) -> frozenset[str]:
    """The registered packets of a class and/or a library."""
    return frozenset(p for p, c in _CLASS.items()
                     if (cls is None or c == cls) and (library is None or _LIBRARY.get(p) == library))


# cuBLAS (and cuBLASLt, which shares its workspace). Under inference_mode the tracer sees composite
# ops (linear, matmul, einsum, bilinear) undecomposed.
register_class("matmul", "aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.matmul",
               "aten.linear", "aten._scaled_mm", "aten.addbmm", "aten.addmv", "aten.mv", "aten.dot",
               "aten._int_mm", "aten._addmm_activation", "aten.einsum", "aten.bilinear", library=CUBLAS)
# weight-only quantized matmuls run PyTorch's own kernels, not cuBLAS
register_class("matmul", "aten._weight_int8pack_mm", "aten._weight_int4pack_mm")
# cuDNN runs convolutions (torch.backends.cudnn.enabled, the default), composite names included
register_class("conv", "aten.convolution", "aten._convolution", "aten.cudnn_convolution",
               "aten.convolution_backward", "aten.conv1d", "aten.conv2d", "aten.conv3d",
               "aten.conv_transpose1d", "aten.conv_transpose2d", "aten.conv_transpose3d", library=CUDNN)
# PyTorch's own convolution kernels (depthwise, the slow path, oneDNN on CPU), and cuDNN's transposed entry
# point, whose weight is laid out (in, out / groups, k...): conv work, none of them a cuDNN workspace rule's
register_class("conv", "aten.convolution_overrideable", "aten._slow_conv2d_forward", "aten._slow_conv2d_backward",
               "aten.mkldnn_convolution", "aten._conv_depthwise2d", "aten.conv_depthwise3d",
               "aten.cudnn_convolution_transpose")
# cuDNN's fused RNN (CUDA runs every full nn.LSTM / GRU / RNN as one call; the tracer's stand-in, trace/rnn.py)
register_class("rnn", "aten._cudnn_rnn", "aten._cudnn_rnn_backward", "gpuwise.cudnn_rnn",
               "gpuwise.cudnn_rnn_backward", library=CUDNN)
register_class("attention", "aten._scaled_dot_product_flash_attention_for_cpu",
               "aten._scaled_dot_product_flash_attention_for_cpu_backward",
               "aten.scaled_dot_product_attention")
# cuDNN runs batch norm in training and evaluation (torch.backends.cudnn.enabled, the default)
register_class("norm", "aten.native_batch_norm", "aten.native_batch_norm_backward", "aten.batch_norm",
               "aten.cudnn_batch_norm", "aten.cudnn_batch_norm_backward", "aten._native_batch_norm_legit",
               "aten._native_batch_norm_legit_functional", "aten._native_batch_norm_legit_no_training",
               library=CUDNN)
register_class("norm", "aten.native_layer_norm", "aten.native_layer_norm_backward", "aten.native_group_norm",
               "aten.native_group_norm_backward", "aten._fused_rms_norm", "aten._fused_rms_norm_backward",
               "aten.batch_norm_stats", "aten.batch_norm_elemt", "aten.batch_norm_backward_reduce",
               "aten.batch_norm_backward_elemt", "aten.rms_norm", "aten.layer_norm", "aten.group_norm")
register_class("reduction", "aten.sum", "aten.mean", "aten.amax", "aten.amin", "aten.max", "aten.min",
               "aten.argmax", "aten.argmin", "aten.prod", "aten.var", "aten.var_mean", "aten.std",
               "aten.norm", "aten.linalg_vector_norm", "aten._softmax", "aten._log_softmax",
               "aten._softmax_backward_data", "aten._log_softmax_backward_data", "aten.nll_loss_forward",
               "aten.nll_loss_backward", "aten.nll_loss2d_forward", "aten.nll_loss2d_backward",
               "aten.cumsum", "aten.logsumexp", "aten.topk", "aten.sort", "aten.all", "aten.any",
               "aten.avg_pool2d", "aten.avg_pool2d_backward", "aten.max_pool2d_with_indices",
               "aten.max_pool2d_with_indices_backward", "aten._adaptive_avg_pool2d",
               "aten._adaptive_avg_pool2d_backward", "aten.adaptive_max_pool2d",
               "aten.adaptive_max_pool2d_backward", "aten.mse_loss", "aten.mse_loss_backward",
               "aten.binary_cross_entropy_with_logits", "aten.cross_entropy_loss")
register_class("embedding", "aten.embedding", "aten.embedding_dense_backward", "aten.index_select",
               "aten.gather", "aten.scatter", "aten.scatter_add", "aten.index", "aten.index_put",
               "aten._index_put_impl", "aten.index_add", "aten.embedding_bag", "aten._embedding_bag",
               "aten.masked_select", "aten.take", "aten.scatter_reduce")
register_class("copy", "aten._to_copy", "aten.copy_", "aten.copy", "aten.clone", "aten.contiguous",
               "aten.cat", "aten.stack", "aten.constant_pad_nd", "aten.repeat", "aten.flip", "aten.roll",
               "aten._unsafe_view_copy", "aten.narrow_copy", "aten.slice_backward", "aten.select_backward",
               "aten.index_select_backward", "aten.new_zeros", "aten.zeros_like", "aten.zeros", "aten.ones",
               "aten.ones_like", "aten.full", "aten.full_like", "aten.fill_", "aten.fill", "aten.zero_",
               "aten.new_ones", "aten.new_full", "aten.arange", "aten.tril", "aten.triu", "aten.im2col",
               "aten.col2im", "aten.upsample_nearest2d", "aten.upsample_bilinear2d",
               "aten.upsample_nearest2d_backward", "aten.upsample_bilinear2d_backward")
register_class("elementwise", *(f"aten.{n}" for n in (
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "abs", "exp", "log", "sqrt",
    "rsqrt", "pow", "reciprocal", "sigmoid", "sigmoid_backward", "tanh", "tanh_backward", "relu", "relu_",
    "threshold_backward", "gelu", "gelu_backward", "silu", "silu_", "silu_backward", "hardswish",
    "hardswish_", "hardswish_backward", "hardsigmoid", "hardsigmoid_", "hardsigmoid_backward", "elu",
    "elu_backward", "leaky_relu", "leaky_relu_backward", "hardtanh", "hardtanh_", "hardtanh_backward",
    "softplus", "softplus_backward", "mish", "mish_backward", "clamp", "clamp_", "clamp_min",
    "clamp_max", "where", "masked_fill", "masked_fill_", "addcmul", "addcmul_", "addcdiv", "addcdiv_",
    "lerp", "lerp_", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_not",
    "logical_and", "logical_or", "bitwise_not", "native_dropout", "native_dropout_backward", "dropout",
    "bernoulli", "bernoulli_", "rand_like", "randn_like", "uniform_", "normal_", "sign", "sin", "cos",
    "erf", "erfinv", "floor", "ceil", "round", "trunc", "frac", "remainder", "fmod", "sqrt_", "mul_",
    "rsub", "sgn", "square", "exp_", "log1p", "expm1", "_masked_scale", "isinf", "isnan", "nan_to_num",
    "_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_", "glu", "glu_backward",
    "prelu", "_prelu_kernel", "_prelu_kernel_backward", "gelu_", "relu6", "logit", "smooth_l1_loss",
)))
# CUDA's fused RNN cells (an LSTMCell / GRUCell step's gates after its two GEMMs): one pointwise kernel each
register_class("elementwise", "aten._thnn_fused_lstm_cell", "aten._thnn_fused_lstm_cell_backward_impl",
               "aten._thnn_fused_gru_cell", "aten._thnn_fused_gru_cell_backward")
register_class(VIEW, *(f"aten.{n}" for n in (
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "as_strided", "unsqueeze",
    "squeeze", "slice", "select", "detach", "alias", "split", "split_with_sizes", "chunk", "unbind",
    "narrow", "view_as", "expand_as", "flatten", "unflatten", "diagonal", "empty", "empty_like",
    "empty_strided", "new_empty", "new_empty_strided", "lift_fresh", "lift_fresh_copy", "sym_size",
    "sym_stride", "sym_numel", "size", "stride", "is_same_size", "_reshape_alias", "resize_",
    "set_", "_local_scalar_dense", "item", "_has_compatible_shallow_copy_type", "result_type",
    "is_nonzero", "dim", "numel", "_to_copy_view", "view_as_real", "view_as_complex", "movedim",
    "swapaxes", "_nested_tensor_from_mask", "t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_",
    "_foreach_view",
)))
