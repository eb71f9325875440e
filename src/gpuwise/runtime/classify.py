"""Which class of GPU kernel each traced aten operator becomes, as the time model reads it.

The taxonomy itself is ``gpuwise.trace.ops`` (one registry for every part); this module adds the
time model's one view of it: every kernel of the optimizer phase is optimizer work. Classes decide
which rate applies (tensor cores, CUDA cores, memory bandwidth) and which efficiency is fitted.
"""

from __future__ import annotations

from gpuwise.trace.ops import CLASSES, VIEW, classify_name, packet_of, register_class
from gpuwise.trace.records import OpRecord

__all__ = ["CLASSES", "VIEW", "classify", "classify_name", "packet_of", "register_class"]


def classify(op: OpRecord) -> str:
    """The class of one record. Every kernel of the optimizer phase is optimizer work, whatever
    the op (a for-loop optimizer runs plain ``add_``/``mul_``), so the split reads as users think."""
    cls = classify_name(op.op)
    if cls == VIEW:
        return VIEW
    if op.phase == "optimizer":
        return "optimizer"
    return cls
