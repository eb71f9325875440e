"""The host side of an eager PyTorch step: CPU time to issue each operator and its kernels.

Eager PyTorch issues every kernel from one Python thread; when that takes longer than the GPU
needs to run them (small batches, small models, fast GPUs) the host sets the pace. Per operator:

* forward ops are called from Python through ``nn.Module``/functional layers and the dispatcher:
  ``PYTHON_FORWARD_S`` per class, measured on the build machine's CPU with one-element tensors
  (``benchmarks/host_overhead.py``, ``benchmarks/results/time_host.md``: the dispatcher and Python
  side of an eager call, no compute);
* backward ops are issued by autograd's C++ engine: ``AUTOGRAD_OP_S`` each (measured the same way:
  a bare in-place aten call);
* every CUDA kernel adds ``CUDA_LAUNCH_S``: ``cudaLaunchKernel`` and PyTorch's CUDA path (stream,
  device guard, caching allocator). Not measurable without a GPU: a prior, from NVIDIA's CUDA Graphs
  post (developer.nvidia.com/blog/cuda-graphs, 2019: launch overhead of a few microseconds each);
* a cuDNN convolution adds ``CUDNN_CALL_S`` (descriptors, execution-plan cache lookup; a prior);
* views cost ``VIEW_S`` (measured: a dispatcher call that launches nothing).

torch.compile (default mode) replaces the per-op dispatch by Inductor's generated wrapper: each
kernel costs ``COMPILED_KERNEL_S`` (launch + wrapper), views nothing.
"""

from __future__ import annotations

from gpuwise.runtime.stack import Stack

# Measured 2026-12-03 on the build machine (benchmarks/results/time_host.md), seconds per call.
PYTHON_FORWARD_S = {"conv": 16e-6, "norm": 23e-6, "matmul": 6.3e-6, "attention": 6.5e-6}  # norm: BatchNorm2d
PYTHON_FORWARD_DEFAULT_S = 6.1e-6   # an activation module / tensor method (relu, add, ...)
AUTOGRAD_OP_S = 1.2e-6
VIEW_S = 2.9e-6
OPTIMIZER_OP_S = 4e-6               # a foreach call from torch.optim's Python step
# Priors (no GPU here).
CUDA_LAUNCH_S = 5e-6
CUDNN_CALL_S = 10e-6
COMPILED_KERNEL_S = 7e-6


def host_s(cls: str, kernels: int, phase: str, stack: Stack) -> float:
    """CPU time to issue one traced operator (``kernels`` CUDA launches; 0: a view)."""
    if stack.compile and phase != "optimizer":
        return kernels * COMPILED_KERNEL_S
    if kernels == 0:
        return VIEW_S
    if phase == "backward":
        call = AUTOGRAD_OP_S
    elif phase == "optimizer":
        call = OPTIMIZER_OP_S
    else:
        call = PYTHON_FORWARD_S.get(cls, PYTHON_FORWARD_DEFAULT_S)
    library = CUDNN_CALL_S if cls == "conv" else 0.0
    return call + library + kernels * CUDA_LAUNCH_S
