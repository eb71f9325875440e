"""How a guarded run ended, as its run log records it, and what that does to the reading of its curve.

The guard writes the end of each attempt into the run log's meta (``gpuwise/guard/train_end.py``, docs/guard.md):
``train_end`` (finished, preempted, crashed, interrupted or stopped), ``train_end_step`` (steps completed),
``train_end_t_s`` and ``train_end_detail`` (one line: the exception, the preemption's exit). advise cannot import
the guard (the parts' arrows, DESIGN.md): the names of that record are the run log's (``gpuwise.runlog.TRAIN_END_*``),
which the guard writes and this module reads.

A curve that ends because the run crashed or was preempted is read as far as it goes: the user hears first that
the run did not finish, and that a plateau or a loss that did not fall is of the steps before that end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from gpuwise.advise.advice import Advice, is_flat
from gpuwise.advise.analysis import CurveAnalysis
from gpuwise.advise.data import Curve
from gpuwise.runlog import (TRAIN_END_DETAIL_CHARS, TRAIN_END_DETAIL_KEY, TRAIN_END_KEY, TRAIN_END_OUTCOMES,
                            TRAIN_END_STEP_KEY, TRAIN_END_T_S_KEY)
from gpuwise.text import clipped

FINISHED, PREEMPTED, CRASHED, INTERRUPTED, STOPPED = TRAIN_END_OUTCOMES

# what cut the curve short, as a sentence's subject reads it ("… ends there because of {cause}")
_CAUSE = {PREEMPTED: "the preemption", CRASHED: "the crash", INTERRUPTED: "the interruption",
          STOPPED: "the process's end"}
_WHAT_HAPPENED = {FINISHED: "finished", PREEMPTED: "was preempted", CRASHED: "crashed",
                  INTERRUPTED: "was interrupted (Ctrl-C)", STOPPED: "stopped without guard.close()"}


@dataclass(frozen=True)
class RunEnd:
    """The recorded end of a guarded run's last attempt: ``outcome`` (one of ``TRAIN_END_OUTCOMES``) after ``step``
    completed optimizer steps (None: not recorded in a form read here), ``detail`` (one line, "" where none), and
    whether the loss curve ends with it (``ends_curve``: False where losses were logged after it, by a later attempt
    that is still running or was killed outright, which records no end)."""

    outcome: str
    step: int | None
    detail: str = ""
    ends_curve: bool = True

    @property
    def finished(self) -> bool:
        return self.outcome == FINISHED

    @property
    def cut_short(self) -> bool:
        """The curve ends because the run did not finish: every reading of it is of the steps before that end."""
        return self.ends_curve and not self.finished

    @property
    def how(self) -> str:
        """``was preempted``, ``crashed``, …: what the run did, as a sentence's verb reads it."""
        return _WHAT_HAPPENED.get(self.outcome, self.outcome)

    @property
    def words(self) -> str:
        """``crashed at step 15 (step 16 raised ValueError: …)``: the outcome, its step and its detail."""
        at = f" at step {self.step:,}" if self.step is not None else ""
        return f"{self.outcome}{at}" + (f" ({self.detail})" if self.detail else "")

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "step": self.step, "detail": self.detail or None,
                "finished": self.finished, "ends_curve": self.ends_curve}


def recorded_run_end(meta: Mapping[str, str], curve: Curve) -> RunEnd | None:
    """The end ``meta`` (a run log's, ``runlog.read_meta``) records, checked against ``curve``; None where it records
    none (a CSV, a log of a run without the guard, a process killed outright) or an outcome the guard does not write.
    The detail is clipped as the guard clips it (a log edited by hand may hold more)."""
    outcome = str(meta.get(TRAIN_END_KEY) or "").strip()
    if outcome not in TRAIN_END_OUTCOMES:
        return None
    step = _int_or_none(meta.get(TRAIN_END_STEP_KEY))
    detail = clipped(" ".join(str(meta.get(TRAIN_END_DETAIL_KEY) or "").split()), TRAIN_END_DETAIL_CHARS)
    end_t_s = _float_or_none(meta.get(TRAIN_END_T_S_KEY))
    return RunEnd(outcome, step, detail, ends_curve=not _logged_after(curve, step, end_t_s))


def _logged_after(curve: Curve, end_step: int | None, end_t_s: float | None) -> bool:
    """Whether ``curve`` holds losses logged after the recorded end: a later step, or a later wall time (a
    restart that resumed from an earlier checkpoint logs lower steps again)."""
    if not len(curve):
        return False
    if end_step is not None and int(curve.steps[-1]) > end_step:
        return True
    if end_t_s is None or curve.t_s is None:
        return False
    t_s = curve.t_s[np.isfinite(curve.t_s)]
    return bool(len(t_s)) and float(t_s.max()) > end_t_s


def _int_or_none(text: str | None) -> int | None:
    try:
        value = int(str(text).strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _float_or_none(text: str | None) -> float | None:
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def run_end_advice(end: RunEnd | None, a: CurveAnalysis) -> list[Advice]:
    """The item that opens the advice when the run did not finish (or when the recorded end is an earlier attempt's):
    how it ended, that the curve ends there because of it, and what that means for the diagnosis below."""
    if end is None or end.finished:
        return []
    numbers = end.to_dict()
    if not end.ends_curve:
        text = (f"The run log records how an earlier attempt ended: {end.words}. Losses were logged after it, to "
                f"step {a.last_step:,}: the attempt that logged them is still running, or was killed outright "
                "(kill -9 records no end).")
        return [Advice("run_end", "An earlier attempt did not finish", text, numbers)]
    steps = f"the {end.step:,} steps it ran" if end.step is not None else "the steps it ran"
    if end.outcome == STOPPED:   # a script without close() that ran its loop to the end reads the same
        why = f"Whether its loop had run to the end the log cannot tell: what follows reads {steps}."
    else:
        why = (f"The loss curve ends there because of {_CAUSE[end.outcome]}, not because training is done: what "
               f"follows reads {steps}.")
    text = f"The run did not finish: {end.words}. {why} {_reading(end, a)} {_next_step(end)}"
    return [Advice("run_end", f"The run {end.how}", text, numbers)]


def _reading(end: RunEnd, a: CurveAnalysis) -> str:
    """What the diagnosis means for a curve cut short by ``end``."""
    cause = _CAUSE[end.outcome]
    if a.diagnosis == "not_learning":
        return (f"The loss had not fallen before {cause}: a crash and a loss that does not fall can have one cause "
                "(bad data, a broken pipeline), so read the error first." if end.outcome == CRASHED else
                f"The loss had not fallen before {cause}; restarting does not change that.")
    if a.diagnosis == "diverged":
        return (f"The loss had diverged before {cause}: a NaN/inf loss can be what raised the error."
                if end.outcome == CRASHED else f"The loss had diverged before {cause}: restart from a good checkpoint.")
    if is_flat(a):
        return (f"The plateau is read from the steps before {cause}; it is not why the run ended"
                + (": a flat curve followed by a crash can have one cause (bad data), so read the error first."
                   if end.outcome == CRASHED else "."))
    return f"The loss was still falling when {cause} ended the curve: a resumed run picks up from there."


def _next_step(end: RunEnd) -> str:
    if end.outcome == PREEMPTED:
        return "Restart it: the guard resumes from the checkpoint it wrote (exit code 75 asks a supervisor to)."
    if end.outcome == STOPPED:
        return ("If the loop did run to its end, call guard.close() after it: the run log then records it "
                "finished.")
    if end.outcome == INTERRUPTED:
        return "Restart it to go on: the guard resumes from its last checkpoint."
    return "Fix the error and restart: the guard resumes from its last checkpoint."
