"""Where the shipped time model's measured error applies, and the range it gives around a prediction.

The held-out runs behind ``runtime/time_accuracy.json`` are traced jobs timed by the shipped model,
grouped by regime (``runtime/accuracy.py``): a prediction gets the range of its own regime, and none
where no held-out run's step time of that regime is scored, nor for a step the input rate sets (the user's
own figure) or a prediction the user's calibration moved (the range describes the shipped model). Where a
regime has no range the words say which of two it is (``why_no_range``): too few runs, or none ("no held-out
run measures this").
estimate, recommend and report use this rule.
"""

from __future__ import annotations

from gpuwise.runtime.accuracy import (LLM_REGIME, LLM_REGIMES, MIN_CASES, REGIME_WORDS, TimeAccuracy,
                                      held_out_cases, load_accuracy)
from gpuwise.units import format_duration

__all__ = ["TimeAccuracy", "job_range_note", "job_range_words", "likely_job_time_range_s", "likely_step_time_range_s",
           "load_accuracy", "no_range_note", "regime_of", "time_basis_lines", "why_no_range"]


def regime_of(method: str, regime: str | None) -> str:
    """The regime of a prediction: the closed form's (``llm``, or ``llm-train`` where its step says so), else what
    the step predictor said."""
    if method != "traced":
        return regime if regime in LLM_REGIMES else LLM_REGIME
    return regime or "large-batch"


def likely_step_time_range_s(step_time_s: float | None, *, method: str, bound: str | None = None,
                             calibrated: bool = False, regime: str | None = None) -> tuple[float, float] | None:
    """Where 8 in 10 held-out public runs of this regime measured, given this prediction; None where that
    says nothing."""
    accuracy = load_accuracy(regime_of(method, regime))
    if accuracy is None or not step_time_s or bound == "input" or calibrated:
        return None
    return accuracy.likely_range_s(step_time_s)


def why_no_range(name: str, *, named: bool = True) -> str:
    """Why the regime ``name`` has no range: fewer than ``MIN_CASES`` held-out runs scored, or none. ``named``: the
    words say which regime (a line about several regimes names it before)."""
    words = REGIME_WORDS.get(name, name)
    cases = held_out_cases(name)
    if 0 < cases < MIN_CASES:
        return (f"only {cases} held-out run{'s' if cases != 1 else ''} of {words if named else 'this kind'} "
                f"scored, fewer than the {MIN_CASES} a range needs")
    return f"no held-out run measures this{f' ({words})' if named else ''}"


def no_range_note(method: str, regime: str | None = None, *, bound: str | None = None,
                  calibrated: bool = False) -> str | None:
    """Why a prediction has no range because no held-out run's step time of its regime is scored (None: it has
    one, or the range is absent for the user's own reasons: an input rate, a calibration)."""
    name = regime_of(method, regime)
    if bound == "input" or calibrated or load_accuracy(name) is not None:
        return None
    return why_no_range(name)


def likely_job_time_range_s(quote, method: str) -> tuple[float, float] | None:
    """The same range around one of recommend's options' job time (a quote that fits, with a time)."""
    if not quote.fits or not quote.total_time_s:
        return None
    return likely_step_time_range_s(quote.total_time_s, method=method, bound=quote.bound,
                                    calibrated=bool(quote.calibration), regime=quote.regime)


def _timed_by_the_shipped_model(quote) -> bool:
    """An option whose job time a range speaks of: it fits and is timed, not by the user's input rate nor moved by
    their calibration (those are the user's own matter, as ``time_basis_lines`` counts them)."""
    return bool(quote.fits and quote.total_time_s and not quote.calibration and quote.bound != "input")


def job_range_note(quote, method: str) -> str | None:
    """Why one of recommend's options has no likely range (``no_range_note``, in its regime's words; None: it has
    one, or it is not an option a range speaks of): each option's ``likely_range_note`` in --json."""
    if not _timed_by_the_shipped_model(quote):
        return None
    return no_range_note(method, quote.regime, bound=quote.bound, calibrated=bool(quote.calibration))


def job_range_words(quote, method: str) -> str | None:
    """One short clause on how far one of recommend's options' job time may be off, for the Best line: its
    regime and likely range ("large-batch: likely 56.6 s–105.3 s"), else why it has none ("small-batch: no held-out run
    measures this"); None where no range speaks of it (``_timed_by_the_shipped_model``)."""
    if not _timed_by_the_shipped_model(quote):
        return None
    name = regime_of(method, quote.regime)
    likely = likely_job_time_range_s(quote, method)
    if likely is None:
        return f"{name}: {why_no_range(name, named=False)}"
    return f"{name}: likely {format_duration(likely[0])}–{format_duration(likely[1])}"


def time_basis_lines(options, method: str) -> list[str]:
    """recommend's word on its times, one line per regime among the options that fit and have a time (an
    input-bound or calibrated option's range is the user's own matter): the held-out range where runs of that
    regime are scored, else why not (``why_no_range``). One regime: one line for all the options;
    several (single-GPU options beside multi-GPU ones): a line each, naming which options it is about, so a
    multi-GPU pick never borrows the single-GPU range (a new user's 8x V100 pick read "0.77-1.42x")."""
    counts: dict[str, int] = {}
    for o in options:
        if _timed_by_the_shipped_model(o):
            name = regime_of(method, o.regime)
            counts[name] = counts.get(name, 0) + 1
    lines = []
    for name, n in counts.items():
        about = "" if len(counts) == 1 else f" of the {n} option{'s' if n != 1 else ''} of {REGIME_WORDS.get(name, name)}"
        accuracy = load_accuracy(name)
        if accuracy is not None:
            low, high = accuracy.likely_range_s(1.0)
            lines.append(f"Times and costs{about}: 8 in 10 held-out public runs took {low:.2f}-{high:.2f}x the "
                         f"predicted time (median error {accuracy.median_abs_error:.0%}).")
        elif name == LLM_REGIME:
            lines.append(f"Times and costs{about}: the LLM closed form (docs/llm.md); no held-out public runs "
                         "measure its time error yet.")
        else:
            lines.append(f"Times and costs{about}: {why_no_range(name, named=not about)}.")
    return lines
