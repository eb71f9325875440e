"""One op taxonomy (issue 23 item 3): the time model's classes and the CUDA memory rules' library
families are one registry (gpuwise/trace/ops.py), so they cannot disagree about an operator."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gpuwise
from gpuwise.memory import cuda
from gpuwise.runtime.classify import classify_name
from gpuwise.trace import ops

SRC = Path(gpuwise.__file__).parent


@pytest.mark.parametrize("op", ["aten.conv_transpose2d.input", "aten.conv_transpose1d.input",
                                "aten.conv_transpose3d.input"])
def test_a_transposed_convolution_is_conv_work_for_time_as_for_memory(op):
    # before: memory's cuDNN list held conv_transpose*, the time model's classes did not ("other")
    assert op.rsplit(".", 1)[0] in cuda.CONV_OPS
    assert classify_name(op) == "conv"


@pytest.mark.parametrize("op", ["aten.einsum.default", "aten.bilinear.default", "aten._addmm_activation.default"])
def test_what_cublas_runs_is_matmul_work(op):
    # before: in memory's BLAS list (a cuBLAS workspace) but classed "other" by the time model
    assert ops.library_of(op) == ops.CUBLAS
    assert classify_name(op) == "matmul"


def test_the_memory_rules_families_are_the_registrys():
    assert cuda.BLAS_OPS == ops.packets(library=ops.CUBLAS) <= ops.packets("matmul")
    assert cuda.CONV_OPS <= ops.packets("conv") and "aten.convolution_backward" not in cuda.CONV_OPS
    assert cuda.CUDNN_OPS <= ops.packets("conv") | ops.packets("norm") | ops.packets("rnn")
    assert {"aten.convolution_backward", "aten.native_batch_norm"} <= cuda.CUDNN_OPS
    # PyTorch's own conv kernels are conv work without cuDNN's modules or workspace
    for own in ("aten._conv_depthwise2d", "aten._slow_conv2d_forward", "aten.mkldnn_convolution"):
        assert classify_name(own + ".default") == "conv" and own not in cuda.CUDNN_OPS
    # weight-only quantized matmuls are matmul work on PyTorch's own kernels, not cuBLAS
    assert classify_name("aten._weight_int8pack_mm.default") == "matmul"
    assert ops.library_of("aten._weight_int8pack_mm.default") is None


def test_unknown_classes_and_libraries_are_refused():
    with pytest.raises(ValueError, match="op class"):
        ops.register_class("gemm", "aten.fake_op")
    with pytest.raises(ValueError, match="CUDA library"):
        ops.register_class("matmul", "aten.fake_op", library="rocblas")


def test_op_names_are_split_into_packets_in_one_place():
    pattern = re.compile(r"""\.count\(["']\.["']\)\s*>=\s*2|\.rsplit\(["']\.["'],\s*1\)\[0\]""")
    found = [f"{p.relative_to(SRC)}:{i}" for p in sorted(SRC.rglob("*.py")) if p != SRC / "trace" / "ops.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "use gpuwise.trace.ops.packet_of: " + ", ".join(found)
