"""What an indexing kernel moves through DRAM: the elements it selects or addresses, not the tensor it indexes.

PyTorch's ``embedding`` is ``weight.index_select(0, indices.reshape(-1))`` (``Embedding.cpp``); CUDA's
index_select, gather, take and advanced indexing read the indices and the selected elements and write them. An
in-place scatter writes the addressed elements of ``self`` (and reads them when it accumulates), never the rest
of ``self``. A trace counts every input tensor whole, so without this a lookup in a 128k-row table is timed as
reading the table. A gather's rate is its loads' (one element each, with index arithmetic): Liger's A100 rows
are flat in the vocabulary even where the table fits in L2, so repeated rows count each time.
"""

from __future__ import annotations

import math

from gpuwise.trace.ops import packet_of
from gpuwise.trace.records import OpRecord, dtype_bytes

GATHERS = frozenset({"aten.embedding", "aten.index_select", "aten.gather", "aten.index", "aten.take"})
# in-place scatters by how their addressed elements are counted: by the values' elements (index_put, whose
# values are the selection's shape; index_copy and index_add, whose source is), or by the index's (scatter:
# ``index.size(d) <= src.size(d)``, only the index's elements of src are read)
_BY_VALUES = frozenset({"aten.index_put_", "aten._index_put_impl_", "aten.index_copy_", "aten.index_add_"})
_BY_INDEX = frozenset({"aten.scatter_", "aten.scatter_add_", "aten.scatter_reduce_"})
SCATTERS = _BY_VALUES | _BY_INDEX
_ACCUMULATING = frozenset({"aten.index_add_", "aten.scatter_add_", "aten.scatter_reduce_"})
_INDEX_PUTS = frozenset({"aten.index_put_", "aten._index_put_impl_"})
_MASK_DTYPES = ("bool", "uint8")


def _numel(shape) -> int:
    return math.prod(shape)


def _bytes(op: OpRecord, i: int) -> int:
    return _numel(op.input_shapes[i]) * dtype_bytes(op.input_dtypes[i])


def _broadcast_numel(shapes) -> int:
    """Elements of the broadcast of ``shapes`` (index tensors of an advanced index)."""
    rank = max((len(s) for s in shapes), default=0)
    dims = [1] * rank
    for s in shapes:
        for k, d in enumerate(s, start=rank - len(s)):
            dims[k] = max(dims[k], d)
    return _numel(dims)


def indexing_bytes(op: OpRecord) -> float | None:
    """Bytes an indexing kernel moves: a gather reads its indices and the selected elements and writes them; an
    in-place scatter reads its indices and values and writes the addressed elements of ``self`` (reads them too
    when it accumulates). None where the trace cannot say: not an indexing op; a boolean or byte mask index, whose
    true elements are data; values broadcast over the selection (``x[idx] = row``) or a single value."""
    name = packet_of(op.op)
    if (name not in GATHERS and name not in SCATTERS) or len(op.input_shapes) < 2 or not op.input_dtypes:
        return None
    if name in GATHERS:
        if not op.output_shapes or any(d in _MASK_DTYPES for d in op.input_dtypes[1:]):
            return None
        indices = sum(_bytes(op, i) for i in range(1, len(op.input_shapes)))      # the source comes first
        selected = _numel(op.output_shapes[0]) * dtype_bytes(op.output_dtypes[0])
        return float(indices + 2 * selected)
    values = len(op.input_shapes) - 1          # the values / source tensor comes last
    index_inputs = range(1, values)
    if values < 2 or any(op.input_dtypes[i] in _MASK_DTYPES for i in index_inputs):
        return None
    elem = dtype_bytes(op.input_dtypes[0])
    indices = sum(_bytes(op, i) for i in index_inputs)
    if name in _BY_INDEX:
        addressed = _numel(op.input_shapes[1])
        read_values = addressed * dtype_bytes(op.input_dtypes[values])
    else:
        addressed = _numel(op.input_shapes[values])
        if addressed <= 1 or (name in _INDEX_PUTS
                              and addressed < _broadcast_numel([op.input_shapes[i] for i in index_inputs])):
            return None
        read_values = _bytes(op, values)
    accumulates = name in _ACCUMULATING or bool(op.attrs.get("accumulate"))
    return float(indices + read_values + addressed * elem * (2 if accumulates else 1))
