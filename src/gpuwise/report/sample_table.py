"""A log's samples as columns (numpy arrays), the form the report summarises and plots them in.

A gpuwise run log of a day on 8 GPUs holds 691,200 rows: read as one ``GpuSample`` per row it took the report
tens of seconds and a GiB. ``read_sample_table`` reads the columns the report uses (``NUMBER_COLUMNS``,
``TEXT_COLUMNS``) in chunks of rows (``runlog.iter_gpu_sample_rows``) straight into arrays; the texts (GPU
name, uuid), a few distinct values repeated on every row, are kept once each, with a code per row.
``sample_table`` turns the samples of the text logs (nvidia-smi CSV and dmon, parsed as ``GpuSample``) into the
same table.

A table is a sequence of ``GpuSample`` too, in the log's order (``runlog.SAMPLE_ORDER`` for a run log), so that
``len``, indexing and iteration work as on the text logs' tuples; each sample made on demand carries only the
table's columns (the others None).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuwise.monitor.sample import GpuSample
from gpuwise.runlog import GPU_SAMPLE_COLUMNS, iter_gpu_sample_rows
from gpuwise.text import printable_or_none

NO_MIG = -1   # mig_index of a whole GPU in the table (None in a sample)
# The number columns the report reads (usage, html); NaN in the table where the log has NULL (not reported).
VALUE_COLUMNS = ("utilization_pct", "sm_activity_pct", "memory_used_bytes", "memory_total_bytes",
                 "process_memory_bytes", "power_w")
TEXT_COLUMNS = ("name", "uuid")
KEY_COLUMNS = ("t_s", "gpu_index", "mig_index", "lost")
NUMBER_COLUMNS = KEY_COLUMNS + VALUE_COLUMNS
_NAME, _UUID = TEXT_COLUMNS.index("name"), TEXT_COLUMNS.index("uuid")
_WHOLE_NUMBER_COLUMNS = frozenset(n for n, sql_type in GPU_SAMPLE_COLUMNS if sql_type.startswith("INTEGER"))


@dataclass(frozen=True)
class DeviceColumns:
    """One device (a whole GPU or one MIG instance) of a table: its samples that are not ``lost``, by time."""

    gpu_index: int
    mig_index: int | None
    uuid: str | None          # its first sample's (lost ones included)
    name: str | None          # the first it is given that is not empty
    lost: bool                # some sample says it fell off the bus
    last_t_s: float           # its last sample's time (lost ones included)
    t_s: np.ndarray           # the live samples' times, ascending
    values: Mapping[str, np.ndarray]   # VALUE_COLUMNS of the live samples, NaN where not reported

    @property
    def label(self) -> str:
        """"3", "0/mig1": its samples' ``GpuSample.label``."""
        return GpuSample(t_s=self.last_t_s, gpu_index=self.gpu_index, mig_index=self.mig_index).label

    def reported(self, column: str) -> np.ndarray:
        """The values of ``column`` that were reported (NaN left out), in time order."""
        v = self.values[column]
        return v[~np.isnan(v)]


@dataclass(frozen=True, eq=False)
class SampleTable(Sequence):
    """Samples as columns, one row per sample (a GPU or MIG instance at one time), in the log's order."""

    t_s: np.ndarray           # float64
    gpu_index: np.ndarray     # int64
    mig_index: np.ndarray     # int64, NO_MIG for a whole GPU
    lost: np.ndarray          # bool
    values: Mapping[str, np.ndarray]    # VALUE_COLUMNS, float64, NaN where not reported
    text_codes: np.ndarray    # int32: each row's TEXT_COLUMNS are texts[code]
    texts: tuple[tuple[str | None, ...], ...]   # the distinct TEXT_COLUMNS values, printable (``printable_or_none``)

    def __len__(self) -> int:
        return int(self.t_s.size)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return self._sample(range(len(self))[k])

    def __iter__(self) -> Iterator[GpuSample]:
        return (self._sample(k) for k in range(len(self)))

    def _sample(self, k: int) -> GpuSample:
        values = {n: _python_number(n, self.values[n][k]) for n in VALUE_COLUMNS}
        texts = dict(zip(TEXT_COLUMNS, self.texts[self.text_codes[k]]))
        mig = int(self.mig_index[k])
        return GpuSample(t_s=float(self.t_s[k]), gpu_index=int(self.gpu_index[k]),
                         mig_index=None if mig == NO_MIG else mig, lost=int(self.lost[k]), **values, **texts)

    def devices(self) -> list[DeviceColumns]:
        """Each device's samples, ordered by GPU index then MIG index (a whole GPU first), each by time (ties in
        the log's order)."""
        order = np.lexsort((self.t_s, self.mig_index, self.gpu_index))   # stable: ties keep the log's order
        if not order.size:
            return []
        keys = np.stack((self.gpu_index[order], self.mig_index[order]))
        starts = np.flatnonzero(np.r_[True, np.any(keys[:, 1:] != keys[:, :-1], axis=0)])
        ends = np.r_[starts[1:], order.size]
        return [self._device(order[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]

    def _device(self, rows: np.ndarray) -> DeviceColumns:
        live = rows[~self.lost[rows]]
        codes, first_rows = np.unique(self.text_codes[rows], return_index=True)
        names = (self.texts[c][_NAME] for c in codes[np.argsort(first_rows)].tolist())   # in order of appearance
        mig = int(self.mig_index[rows[0]])
        return DeviceColumns(
            gpu_index=int(self.gpu_index[rows[0]]), mig_index=None if mig == NO_MIG else mig,
            uuid=self.texts[self.text_codes[rows[0]]][_UUID], name=next((n for n in names if n), None),
            lost=bool(self.lost[rows].any()), last_t_s=float(self.t_s[rows[-1]]), t_s=self.t_s[live],
            values={n: self.values[n][live] for n in VALUE_COLUMNS})


def _python_number(column: str, value: float) -> int | float | None:
    if np.isnan(value):
        return None
    return int(value) if column in _WHOLE_NUMBER_COLUMNS else float(value)


class _TextCodes:
    """A code for each distinct (name, uuid) of a log's rows, the texts made printable once."""

    def __init__(self) -> None:
        self._code: dict[tuple, int] = {}
        self.texts: list[tuple[str | None, ...]] = []

    def codes(self, rows: Sequence[tuple]) -> np.ndarray:
        """The code of each row of TEXT_COLUMNS values."""
        code = self._code
        for row in dict.fromkeys(rows):      # the distinct rows, in order of first appearance
            if row not in code:
                code[row] = len(self.texts)
                self.texts.append(tuple(printable_or_none(text) for text in row))
        return np.fromiter(map(code.__getitem__, rows), dtype=np.int32, count=len(rows))


def _table(numbers: np.ndarray, text_codes: np.ndarray, texts: _TextCodes, order: np.ndarray | None) -> SampleTable:
    """The table of ``numbers`` (a row per sample, a column per NUMBER_COLUMNS, NaN for None) and ``text_codes``
    (of ``texts``), its rows put in ``order`` (None: as they are)."""
    if order is not None:
        numbers, text_codes = numbers[order], text_codes[order]
    column = dict(zip(NUMBER_COLUMNS, numbers.T))
    return SampleTable(
        t_s=np.ascontiguousarray(column["t_s"]), gpu_index=column["gpu_index"].astype(np.int64),
        mig_index=np.where(np.isnan(column["mig_index"]), NO_MIG, column["mig_index"]).astype(np.int64),
        lost=np.nan_to_num(column["lost"]) != 0,
        values={n: np.ascontiguousarray(column[n]) for n in VALUE_COLUMNS},
        text_codes=text_codes, texts=tuple(texts.texts))


def _numbers(chunks: Iterable[Sequence[tuple]]) -> np.ndarray:
    """Chunks of rows of NUMBER_COLUMNS values as one array, a row per sample; None is NaN."""
    arrays = [np.array(rows, dtype=float) for rows in chunks]
    return np.concatenate(arrays) if arrays else np.empty((0, len(NUMBER_COLUMNS)))


def _text_codes(chunks: Iterable[Sequence[tuple]], texts: _TextCodes) -> np.ndarray:
    arrays = [texts.codes(rows) for rows in chunks]
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int32)


def read_sample_table(path: str | Path, *, up_to_rowid: int | None = None) -> SampleTable:
    """The ``gpu_samples`` rows of the run log at ``path`` written up to ``up_to_rowid`` (all: None) as a table in
    ``runlog.SAMPLE_ORDER``; rows are read a chunk at a time, never all as Python objects at once (the numbers,
    then the texts: two passes of SQLite, each converted in C). RunLogError where the log cannot be read."""
    numbers = _numbers(iter_gpu_sample_rows(path, NUMBER_COLUMNS, up_to_rowid=up_to_rowid))
    texts = _TextCodes()
    codes = _text_codes(iter_gpu_sample_rows(path, TEXT_COLUMNS, up_to_rowid=up_to_rowid), texts)
    # read as written (rowid order); SAMPLE_ORDER is by time, then GPU, then as written: a stable sort
    column = dict(zip(NUMBER_COLUMNS, numbers.T))
    return _table(numbers, codes, texts, np.lexsort((column["gpu_index"], column["t_s"])))


def sample_table(samples: Sequence[GpuSample]) -> SampleTable:
    """``samples`` as a table, in their order (a table is given back as it is)."""
    if isinstance(samples, SampleTable):
        return samples
    texts = _TextCodes()
    numbers = _numbers([[tuple(getattr(s, n) for n in NUMBER_COLUMNS) for s in samples]] if samples else [])
    codes = _text_codes([[tuple(getattr(s, n) for n in TEXT_COLUMNS) for s in samples]] if samples else [], texts)
    return _table(numbers, codes, texts, None)
