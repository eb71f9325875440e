"""Which column, tag or metric of a log is the loss, the step, the learning rate, the batch size, the time.

Every framework names them differently (``loss``, ``train_loss``, ``train/loss``, ``Loss``...), so names
are matched after normalising: lower case, '/', '-', ' ', '.' -> '_'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from gpuwise.advise.errors import AdviseError
from gpuwise.text import printable

# Normalised names, most specific first. A logger's own optimizer-step counter (HF Trainer's global_step,
# ``train/global_step`` in a W&B export) comes before a plain ``step``.
STEP_NAMES = ("global_step", "train_global_step", "trainer_global_step", "step", "steps", "optimizer_step",
              "train_step", "iteration", "iter", "it")
LOSS_NAMES = ("loss", "train_loss", "training_loss", "loss_train", "train_train_loss", "train_loss_step",
              "trainer_loss", "train_lm_loss", "lm_loss", "loss_step", "train_loss_epoch")
LR_NAMES = ("lr", "learning_rate", "train_lr", "train_learning_rate", "lr_0", "lr_group0", "lr_adamw")
BATCH_NAMES = ("batch_size", "batch", "bs", "global_batch_size", "train_batch_size", "effective_batch_size")
# Wall time, seconds (any origin: only differences are used, so a Unix time and seconds since the start read alike)
# or ISO 8601. TensorBoard's "Wall time" (CSV) and event wall_time, W&B's export (``_timestamp``, Unix, and
# ``_runtime``, since the start: normalised, the leading "_" goes), a hand-written ``wall``/``elapsed_time``.
# Lightning's CSVLogger and HF Trainer's log_history write none (HF's ``train_runtime`` is the whole run's, in the
# summary row the reader drops).
TIME_NAMES = ("t_s", "time_s", "wall_time", "walltime", "wall_time_s", "wall", "wall_s", "wall_clock", "wall_clock_s",
              "time", "timestamp", "elapsed_s", "elapsed", "elapsed_time", "elapsed_time_s", "time_elapsed",
              "runtime", "relative_time")
_EVAL_WORDS = ("val", "eval", "test", "valid", "validation")
# A held-out loss beside the training loss (the overfitting check), most specific first; else any name with "loss"
# and an eval word (``eval/loss`` normalises to ``eval_loss``).
EVAL_LOSS_NAMES = ("eval_loss", "val_loss", "validation_loss", "valid_loss", "loss_val", "loss_eval", "eval_lm_loss",
                   "val_lm_loss", "val_loss_epoch", "test_loss")
# TensorBoard's "Download CSV" of one scalar: its columns, normalised; the loss is its one series, "Value".
TENSORBOARD_CSV = ("step", "value", "wall_time")
TENSORBOARD_CSV_TAG = re.compile(r"-tag-(.+)\.csv$", re.IGNORECASE)   # TensorBoard's run-<run>-tag-<tag>.csv


def normalise_name(name: str) -> str:
    return re.sub(r"[/\-\s.]+", "_", name.strip().lower()).strip("_")


def pick_name(names: Iterable[str], preferred: tuple[str, ...], *, fallback_word: str | None = None) -> str | None:
    """The first of ``names`` whose normalised form is in ``preferred`` (in that order of preference);
    else, with ``fallback_word``, the first name containing that word that is not an eval metric."""
    by_norm = {normalise_name(n): n for n in names}
    for p in preferred:
        if p in by_norm:
            return by_norm[p]
    if fallback_word:
        for norm, original in by_norm.items():
            parts = set(norm.split("_"))
            if fallback_word in norm and not parts & set(_EVAL_WORDS):
                return original
    return None


def is_row_counter(name: str) -> bool:
    """A logging service's own column (W&B's ``_step``, ``_runtime``): ``_step`` counts logged rows, eval rows
    included, not optimizer steps."""
    return name.strip().startswith("_")


def pick_step(names: Iterable[str]) -> str | None:
    """The step column: one of ``STEP_NAMES``, a logger's own (``train/global_step``) before a row counter
    (W&B's ``_step``, read only when the log has no other)."""
    names = list(names)
    return pick_name([n for n in names if not is_row_counter(n)], STEP_NAMES) or pick_name(names, STEP_NAMES)


def loss_like(names: Iterable[str]) -> list[str]:
    """The names that look like a training loss: one of ``LOSS_NAMES``, or any with "loss" that is not an eval
    metric (val/eval/test)."""
    out = []
    for name in names:
        norm = normalise_name(name)
        if norm in LOSS_NAMES or ("loss" in norm and not set(norm.split("_")) & set(_EVAL_WORDS)):
            out.append(name)
    return out


def _is_eval(norm: str) -> bool:
    return bool(set(norm.split("_")) & set(_EVAL_WORDS))


def eval_loss_like(names: Iterable[str]) -> list[str]:
    """The names that look like a held-out (eval/validation/test) loss."""
    return [n for n in names if normalise_name(n) in EVAL_LOSS_NAMES
            or ("loss" in normalise_name(n) and _is_eval(normalise_name(n)))]


def pick_eval_loss(names: Iterable[str], loss_name: str | None) -> str | None:
    """The held-out loss read beside the training loss ``loss_name`` (for the overfitting check): the first of
    ``EVAL_LOSS_NAMES``, else the first eval-like name with "loss"; never the loss itself. None when there is none,
    or when the loss read is itself an eval series (``--loss-tag eval_loss``)."""
    names = [n for n in names if n != loss_name]
    if loss_name is not None and _is_eval(normalise_name(loss_name)):
        return None
    return pick_name(names, EVAL_LOSS_NAMES) or next(iter(eval_loss_like(names)), None)


def is_tensorboard_csv(names: Iterable[str]) -> bool:
    """TensorBoard's "Download CSV" of one scalar: the columns ``Step``, ``Value``, ``Wall time`` and no others."""
    return sorted(normalise_name(n) for n in names) == sorted(TENSORBOARD_CSV)


def pick_loss(path: Path, names: list[str], wanted: str | None, what: str) -> tuple[str | None, tuple[str, ...]]:
    """(the loss series to read, the other loss-like ones: said to be ignored). ``wanted`` (--loss-tag) must be
    one of ``names``, exactly or as normalised; None when the log has no loss-like name and none was asked. A
    TensorBoard CSV download (``is_tensorboard_csv``) is one series: its ``Value`` column is the loss."""
    if wanted is not None:
        exact = [n for n in names if n == wanted] or [n for n in names if normalise_name(n) == normalise_name(wanted)]
        if not exact:
            # every name --loss-tag would accept as a loss series: the training ones and the eval ones
            listed = [n for n in names if n in loss_like(names) or n in eval_loss_like(names)]
            shown = ", ".join(repr(printable(n)[:60]) for n in (listed or names)[:10]) or "none"
            raise AdviseError(f"{path}: no {what} {printable(wanted)[:60]!r} (--loss-tag); "
                              f"{'loss-like ones' if listed else 'there are'}: {shown}")
        chosen = exact[0]
    else:
        chosen = pick_name(names, LOSS_NAMES, fallback_word="loss")
        if chosen is None and is_tensorboard_csv(names):
            tag = TENSORBOARD_CSV_TAG.search(path.name)    # its file name says which scalar it is: run-X-tag-T.csv
            if tag is not None and not (loss_like([tag[1]]) or eval_loss_like([tag[1]])):
                raise AdviseError(f"{path}: a TensorBoard CSV export of {printable(tag[1])[:60]!r}, which is no loss; "
                                  "--loss-tag Value reads it as one anyway")
            chosen = next(n for n in names if normalise_name(n) == "value")
    return chosen, tuple(printable(n) for n in loss_like(names) if n != chosen)
