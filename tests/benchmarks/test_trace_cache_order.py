"""The benchmarks' trace cache keeps the trace's order: torch.compile's fusion (runtime.predict.fuse_for_compile)
fuses runs of neighbouring memory-bound ops, so a trace read back must have them where the tracer saw them. The
cache stored each distinct record with a count in the order of first appearance: a conv, relu, conv, relu trace
came back conv, conv, relu, relu, and every compiled prediction from the cache fused what the real step does not
(benchmarks/README.md, twentieth session, second change)."""

from __future__ import annotations

from benchmarks.time_traces import ORDERED, TraceKey, _dump, _load
from gpuwise.trace.records import OpRecord

KEY = TraceKey("timm:resnet18", "infer", 8, 224, "amp-fp16", "none")


def _op(name: str, shape: tuple[int, ...]) -> OpRecord:
    return OpRecord(index=0, op=name, phase="forward", module="", input_shapes=(shape,), input_dtypes=("float16",),
                    output_shapes=(shape,), output_dtypes=("float16",), flops=0.0, bytes_read=2.0, bytes_written=2.0,
                    attrs={}, kernel_count=1)


def test_a_trace_read_back_keeps_its_order_and_its_repeats():
    conv, relu, add = _op("aten.convolution.default", (8, 64)), _op("aten.relu.default", (8, 64)), _op("aten.add.Tensor", (8, 64))
    records = [conv, relu, relu, conv, relu, add, add, conv]
    d = _dump(records, 10, 10, KEY, "test", 0.0)
    assert d["ordered"] == ORDERED
    assert [n for n, *_ in d["ops"]] == [1, 2, 1, 1, 2, 1]      # runs of identical neighbours collapse
    back, params, trainable = _load(d)
    assert [r.op for r in back] == [r.op for r in records]
    assert (params, trainable) == (10, 10)
