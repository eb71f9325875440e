"""Hand-made operators and GPUs: the time model's rules checked without tracing a model."""

from __future__ import annotations

from gpuwise.catalog.model import GPU
from gpuwise.trace.records import OpRecord, Trace
from gpuwise.workload import Workload


def make_gpu(id="testgpu", *, arch="ampere", sm=108, bw=1555.0, fp32=19.5, tf32=156.0, fp16=312.0,
             bf16=312.0, nvlink=None, pcie=4, name=None, tdp_w=400.0) -> GPU:
    """A GPU of the given specs; one with NVLink is an SXM board (NVSwitch, as an HGX's), else a PCIe card."""
    return GPU(
        id=id, name=name or f"Test {id}", arch=arch, compute_capability="8.0", sm_count=sm,
        cuda_cores=sm * 64, tensor_cores=sm * 4, memory_bytes=40 << 30, memory_bandwidth_gbs=bw,
        l2_bytes=40 << 20, peak_tflops={"fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": bf16},
        tdp_w=tdp_w, pcie_gen=pcie, nvlink_gbs=nvlink, source="test", form_factor="SXM4" if nvlink else "PCIe",
    )


def mm(m, k, n, *, phase="forward", dtype="float32", index=0) -> OpRecord:
    size = 2 if dtype in ("float16", "bfloat16") else 4
    return OpRecord(
        index=index, op="aten.mm.default", phase=phase, module="fc", input_shapes=((m, k), (k, n)),
        input_dtypes=(dtype, dtype), output_shapes=((m, n),), output_dtypes=(dtype,),
        flops=2 * m * k * n, bytes_read=(m * k + k * n) * size, bytes_written=m * n * size,
    )


def pointwise(numel, *, op="aten.relu.default", phase="forward", dtype="float32", kernels=1) -> OpRecord:
    size = 2 if dtype in ("float16", "bfloat16") else 4
    return OpRecord(
        index=0, op=op, phase=phase, module="act", input_shapes=((numel,),), input_dtypes=(dtype,),
        output_shapes=((numel,),), output_dtypes=(dtype,), flops=0, bytes_read=numel * size,
        bytes_written=numel * size, kernel_count=kernels,
    )


def conv(n, c, h, w, cout, k=3, *, groups=1, phase="forward", dtype="float32") -> OpRecord:
    size = 2 if dtype in ("float16", "bfloat16") else 4
    ho, wo = h, w
    flops = 2 * n * cout * ho * wo * (c // groups) * k * k
    return OpRecord(
        index=0, op="aten.convolution.default", phase=phase, module="conv",
        input_shapes=((n, c, h, w), (cout, c // groups, k, k)), input_dtypes=(dtype, dtype),
        output_shapes=((n, cout, ho, wo),), output_dtypes=(dtype,), flops=flops,
        bytes_read=(n * c * h * w + cout * (c // groups) * k * k) * size,
        bytes_written=n * cout * ho * wo * size, attrs={"groups": groups},
    )


def mlp_trace(batch=32, *, width=1024, layers=4, precision="fp32", accum=1, sharding="ddp",
              optimizer=True) -> Trace:
    """A forward/backward/optimizer step of an MLP, op by op as a tracer records it."""
    dtype = "float16" if precision in ("amp-fp16", "fp16") else (
        "bfloat16" if precision in ("amp-bf16", "bf16") else "float32")
    ops = []
    for _ in range(layers):
        ops += [mm(batch, width, width, dtype=dtype), pointwise(batch * width, dtype=dtype)]
    for _ in range(layers):
        ops += [pointwise(batch * width, op="aten.threshold_backward.default", phase="backward", dtype=dtype),
                mm(batch, width, width, phase="backward", dtype=dtype),
                mm(width, batch, width, phase="backward", dtype=dtype)]
    params = layers * width * width
    if optimizer:
        ops.append(pointwise(params, op="aten._foreach_add_.List", phase="optimizer", kernels=layers))
    ops = [OpRecord(**{**op.__dict__, "index": i}) for i, op in enumerate(ops)]
    wl = Workload(model="test:mlp", batch_size=batch, precision=precision, grad_accum_steps=accum,
                  sharding=sharding, optimizer="sgd" if optimizer else "none")
    return Trace(workload=wl, ops=tuple(ops), events=(), param_count=params,
                 trainable_param_count=params, samples_per_step=batch)


def a100_like():
    return make_gpu("a100-test", nvlink=600.0)


def t4_like():
    return make_gpu("t4-test", name="Test T4", arch="turing", sm=40, bw=320.0, fp32=8.1, tf32=None,
                    fp16=65.0, bf16=None, pcie=3)


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


