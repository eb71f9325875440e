"""The TensorBoard reader: a run directory of event files (or one event file) -> ``TrainingLog``, through
tensorboard's own event reader."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from gpuwise.advise.data import Curve, TrainingLog
from gpuwise.advise.downsample import last_per_step
from gpuwise.advise.errors import AdviseError
from gpuwise.advise.names import BATCH_NAMES, LR_NAMES, pick_eval_loss, pick_loss, pick_name
from gpuwise.text import printable

logger = logging.getLogger(__name__)


class _TruncatedRecords(logging.Handler):
    """Collects the event files tensorboard's loader stopped reading at a bad record. The loader swallows
    the DataLossError and says so only at DEBUG level ("Truncated record in PATH"): listened to here, while
    a Reload runs, without letting its debug output through anywhere else."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.files: list[str] = []
        self._logger = logging.getLogger("tensorboard")

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("Truncated record in") and record.args:
            self.files.append(str(record.args[0]))

    def __enter__(self) -> "_TruncatedRecords":
        self._saved = self._logger.level, self._logger.propagate
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]


def read_tensorboard(path: Path, loss_name: str | None = None) -> TrainingLog:
    """A directory of event files (one run), or one event file. Uses tensorboard's own reader."""
    from tensorboard.backend.event_processing import event_accumulator

    run_dir = path
    if path.is_dir() and not any("tfevents" in f.name for f in path.iterdir() if f.is_file()):
        runs = sorted({f.parent for f in path.rglob("*tfevents*") if f.is_file()})
        if not runs:
            raise AdviseError(f"{path}: no TensorBoard event files (events.out.tfevents.*) in this directory")
        if len(runs) > 1:
            listed = ", ".join(str(r.relative_to(path)) for r in runs[:5])
            raise AdviseError(f"{path}: holds {len(runs)} TensorBoard runs ({listed}); pass one of them")
        run_dir = runs[0]
    acc = event_accumulator.EventAccumulator(str(run_dir), size_guidance={event_accumulator.SCALARS: 0})
    damaged = _TruncatedRecords()
    try:
        with damaged:
            acc.Reload()
    except Exception as exc:  # tensorboard raises several types for corrupt files
        raise AdviseError(f"{run_dir}: cannot read TensorBoard events ({type(exc).__name__}: {exc})") from None
    for name in damaged.files:
        logger.warning("%s: damaged or cut off mid-file (a record fails its check): using the events before it",
                       name)
    tags = acc.Tags().get("scalars", [])
    loss_tag, others = pick_loss(run_dir, list(tags), loss_name, "TensorBoard scalar tag")
    if loss_tag is None:
        shown = ", ".join(printable(t)[:40] for t in tags[:20]) or "none"
        raise AdviseError(f"{run_dir}: no loss scalar among the TensorBoard tags ({shown}); --loss-tag NAME reads one")
    events = last_per_step((e.step, e.wall_time, e.value) for e in acc.Scalars(loss_tag))
    steps = np.array([e[0] for e in events])

    def aligned(tag: str | None) -> np.ndarray | None:
        if tag is None:
            return None
        by_step = {e.step: e.value for e in acc.Scalars(tag)}
        return np.array([by_step.get(int(s), math.nan) for s in steps], dtype=float)

    curve = Curve(steps=steps, loss=np.array([e[2] for e in events], dtype=float),
                  t_s=np.array([e[1] for e in events], dtype=float), lr=aligned(pick_name(tags, LR_NAMES)),
                  batch_size=aligned(pick_name(tags, BATCH_NAMES)), source=str(run_dir))
    eval_tag = pick_eval_loss(list(tags), loss_tag)
    eval_curve = None
    if eval_tag is not None:
        ev = last_per_step((e.step, e.wall_time, e.value) for e in acc.Scalars(eval_tag))
        eval_curve = Curve(steps=np.array([e[0] for e in ev], dtype=np.int64), loss=np.array([e[2] for e in ev], dtype=float),
                           source=str(run_dir)) if ev else None
    return TrainingLog(curve=curve, loss_name=printable(loss_tag), other_loss_names=others, eval_curve=eval_curve,
                       eval_name=printable(eval_tag) if eval_curve is not None else None)
