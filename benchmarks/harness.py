"""The one harness every benchmark script uses: a case, a summary, the scoring ledger, the results writer.

- ``Case``: one row of an accuracy set (what was predicted, what was measured, in which units, which
  split, and what each baseline predicts on the same row).
- ``summarize``: n, median |error|, p90 |error|, worst |error|, signed median and the share predicted
  low / high, with error = predicted / measured - 1 everywhere. p90 has one definition, the
  nearest rank: the smallest |error| that at least 90% of the rows are at or under (a value of the
  data, no interpolation).
- ``record_scoring``: every scoring of a held-out split adds one to its count in the committed
  ledger (``results/scoring_ledger.json``); ``scored_words`` is what a results file prints beside it.
- ``write_results``: ``results/<name>.md`` and a JSON beside it holding the figures and the hash of
  the inputs (``benchmarks.staleness``), which ``tests/benchmarks`` checks against the code.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

from benchmarks.registry import by_name
from benchmarks.staleness import DATA, REPO, RESULTS, combined_hash, input_hashes

__all__ = ["DATA", "REPO", "RESULTS", "Case", "Summary", "summarize", "summarize_cases", "p90",
           "relative_error", "comparison_row", "verdict", "record_scoring", "scored_words", "write_results",
           "ROOFLINE", "ROOFLINE_075", "SPEEDUP_N", "CELL_HEADER"]

LEDGER = RESULTS / "scoring_ledger.json"
# The baselines' names, as every results file writes them.
ROOFLINE = "roofline"
ROOFLINE_075 = "roofline / 0.75"
SPEEDUP_N = "speed-up = N"
CELL_HEADER = "median / p90 / worst of |error| (signed median, share predicted low, n)"


def relative_error(predicted: float, measured: float) -> float:
    """predicted / measured - 1: negative is predicted low (faster, smaller) than measured."""
    return predicted / measured - 1.0


@dataclass(frozen=True)
class Case:
    """One scored row: ``baselines`` maps a baseline's name to its prediction on the same row."""

    id: str
    set_name: str
    split: str                  # "train", "test", "held-out", ... as the set's protocol names them
    predicted: float
    measured: float
    units: str                  # "s", "GiB", "speed-up", ...
    baselines: Mapping[str, float] = field(default_factory=dict)

    @property
    def error(self) -> float:
        return relative_error(self.predicted, self.measured)

    def baseline_error(self, name: str) -> float:
        return relative_error(self.baselines[name], self.measured)

    def to_dict(self) -> dict:
        return {**asdict(self), "baselines": dict(self.baselines), "error": self.error}


def p90(values: Iterable[float]) -> float:
    """The nearest-rank 90th percentile: the ceil(0.9 n)-th smallest value."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("p90 of no values")
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Summary:
    n: int
    median_abs: float
    p90_abs: float
    worst_abs: float
    signed_median: float
    share_low: float            # predicted below the measurement
    share_high: float

    def cell(self) -> str:
        """'12.1% / 41.7% / 79.7% (+1.7%, 40% low, n=52)': the columns of ``CELL_HEADER``."""
        if not self.n:
            return "n/a"
        return (f"{self.median_abs:.1%} / {self.p90_abs:.1%} / {self.worst_abs:.1%} "
                f"({self.signed_median:+.1%}, {self.share_low:.0%} low, n={self.n})")

    def to_dict(self) -> dict:
        return asdict(self)


EMPTY = Summary(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)


def summarize(errors: Iterable[float]) -> Summary:
    """The one summary of signed relative errors (``relative_error``)."""
    signed = [float(e) for e in errors]
    if not signed:
        return EMPTY
    absolute = [abs(e) for e in signed]
    n = len(signed)
    return Summary(n=n, median_abs=statistics.median(absolute), p90_abs=p90(absolute), worst_abs=max(absolute),
                   signed_median=statistics.median(signed), share_low=sum(e < 0 for e in signed) / n,
                   share_high=sum(e > 0 for e in signed) / n)


def summarize_cases(cases: Iterable[Case], baseline: str | None = None) -> Summary:
    """The model's summary over ``cases``, or the named baseline's on the same rows."""
    return summarize(c.error if baseline is None else c.baseline_error(baseline) for c in cases)


def comparison_row(label: str, cases: list[Case], baselines: Iterable[str]) -> str:
    """'| label | n | model cell | baseline cells… |' on the same rows."""
    cells = [summarize_cases(cases).cell(), *(summarize_cases(cases, b).cell() for b in baselines)]
    return f"| {label} | {len(cases)} | " + " | ".join(cells) + " |"


def verdict(cases: list[Case], baseline: str = ROOFLINE_075, model: str = "gpuwise") -> str:
    """One sentence: whether the model's median |error| beats the baseline's on the same rows."""
    if not cases:
        return f"No rows: {model} and {baseline} are not compared."
    mine, theirs = summarize_cases(cases), summarize_cases(cases, baseline)
    closer = sum(abs(c.error) < abs(c.baseline_error(baseline)) for c in cases)
    if mine.median_abs < theirs.median_abs:
        head = f"{model} beats {baseline}"
    else:
        head = f"**{model} does not beat {baseline}**"
    return (f"On these {len(cases)} rows {head}: median |error| {mine.median_abs:.1%} vs {theirs.median_abs:.1%}; "
            f"closer on {closer} of {len(cases)} rows.")


# ----------------------------------------------------------------------------- the scoring ledger

def _ledger(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"sets": {}}


def record_scoring(set_name: str, *, ledger: Path = LEDGER) -> int:
    """Count one more scoring of the held-out ``set_name`` in the committed ledger; the new count."""
    doc = _ledger(ledger)
    entry = doc["sets"].setdefault(set_name, {"scored": 0})
    entry["scored"] += 1
    entry["last"] = date.today().isoformat()
    ledger.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return entry["scored"]


def scored_words(set_name: str, *, ledger: Path = LEDGER) -> str:
    """'held-out set scored 4 times (ledger; at least 3 before it began)', printed beside the figure."""
    entry = _ledger(ledger)["sets"].get(set_name, {"scored": 0})
    n = entry["scored"]
    text = f"held-out set scored {n} time{'s' if n != 1 else ''} by the harness"
    before = entry.get("before_ledger")
    return text + (f", at least {before} before it (benchmarks/README.md)" if before else "")


# ----------------------------------------------------------------------------- the results writer

def write_results(benchmark: str, lines: list[str], data: Mapping) -> Path:
    """Write ``results/<results>.md`` (``lines`` and a footer naming the inputs' hash) and the JSON
    beside it (``data``, the date, the command and every input's hash). Returns the markdown path."""
    bench = by_name(benchmark)
    hashes = input_hashes(bench)
    digest = combined_hash(hashes)
    command = " ".join(["python -m", f"benchmarks.{bench.name}", *bench.args])
    md = RESULTS / f"{bench.results}.md"
    RESULTS.mkdir(exist_ok=True)
    footer = ["", "---", "",
              f"Written {date.today().isoformat()} by `{command}` (`python -m benchmarks.run {bench.name}`); "
              f"inputs sha256 `{digest[:16]}` over {len(hashes)} files ({bench.results}.json lists them; "
              "`tests/benchmarks/test_results_fresh.py` fails when they change)."]
    md.write_text("\n".join([*lines, *footer]).rstrip("\n") + "\n")
    doc = {"benchmark": bench.name, "date": date.today().isoformat(), "command": command,
           "inputs_sha256": digest, **data, "inputs": hashes}
    md.with_suffix(".json").write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=_jsonable) + "\n")
    return md


def _jsonable(value):
    if isinstance(value, (Case, Summary)):
        return value.to_dict()
    if hasattr(value, "item"):          # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON: {type(value).__name__}")
