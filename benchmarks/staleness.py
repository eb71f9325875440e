"""Whether a committed results file is older than what it measures: a hash of its declared inputs.

Stdlib only and hashing only (no benchmark is imported or run), so the check is cheap enough for a test.
An input is a path relative to the repository (a file, or a folder: every file under it) or
``shared:<path>`` for the public data in ``shared/data/public-benchmarks/``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchmarks.registry import BENCHMARKS, Benchmark, by_name

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SHARED_PREFIX = "shared:"
ABSENT = "absent"


def _shared_data() -> Path:
    """The public data: beside the checkout (/work/shared for /work/wt/<name>), else /work/shared."""
    for base in (REPO.parent / "shared", REPO.parents[1] / "shared", Path("/work/shared")):
        if (base / "data" / "public-benchmarks").is_dir():
            return base / "data" / "public-benchmarks"
    return Path("/work/shared/data/public-benchmarks")


DATA = _shared_data()


def _files(entry: str) -> list[tuple[str, Path | None]]:
    """(name recorded in the results file, path) of every file an input entry covers, sorted."""
    if entry.startswith(SHARED_PREFIX):
        root, rel = DATA, entry[len(SHARED_PREFIX):]
        label = lambda p: SHARED_PREFIX + p.relative_to(DATA).as_posix()  # noqa: E731
    else:   # relative to the repository (an absolute path, as a test's, is kept as it is)
        root, rel = REPO, entry
        label = lambda p: p.relative_to(REPO).as_posix() if p.is_relative_to(REPO) else p.as_posix()  # noqa: E731
    path = root / rel
    if path.is_dir():
        found = [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                 and p.suffix != ".pyc"]
    elif path.is_file():
        found = [path]
    else:   # recorded as absent: the figure changes when it appears (benchmarks/measured/ from a GPU)
        return [(entry, None)]
    return sorted((label(p), p) for p in found)


def input_hashes(bench: Benchmark) -> dict[str, str]:
    """sha256 of every input file of ``bench``: its script, the harness and what it declares."""
    out = {}
    for entry in bench.all_inputs():
        for name, path in _files(entry):
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path else ABSENT
    return out


def combined_hash(hashes: dict[str, str]) -> str:
    """One hash of the inputs: their names and contents (adding or removing an input changes it)."""
    h = hashlib.sha256()
    for name in sorted(hashes):
        h.update(f"{name}\0{hashes[name]}\n".encode())
    return h.hexdigest()


def results_json(bench: Benchmark) -> Path:
    return RESULTS / f"{bench.results}.json"


def stale_reason(bench: Benchmark) -> str | None:
    """None when ``bench``'s committed results match its current inputs, else why not (one line,
    naming the results file, the changed inputs and the command to re-run)."""
    path = results_json(bench)
    rerun = f"re-run: python -m benchmarks.run {bench.name}"
    if not path.exists():
        return f"{path.relative_to(REPO)} is missing ({rerun})"
    recorded = json.loads(path.read_text()).get("inputs", {})
    current = input_hashes(bench)
    if recorded == current:
        return None
    changed = sorted(n for n in current.keys() & recorded.keys() if current[n] != recorded[n])
    added, removed = sorted(current.keys() - recorded.keys()), sorted(recorded.keys() - current.keys())
    parts = [f"changed {', '.join(changed[:4])}{' …' if len(changed) > 4 else ''}" if changed else "",
             f"new {', '.join(added[:4])}{' …' if len(added) > 4 else ''}" if added else "",
             f"gone {', '.join(removed[:4])}{' …' if len(removed) > 4 else ''}" if removed else ""]
    return (f"{path.relative_to(REPO)} is older than its inputs ({'; '.join(p for p in parts if p)}; "
            f"{rerun})")


def stale(names: list[str] | None = None) -> dict[str, str]:
    """{benchmark name: reason} of every run-by-``make bench`` benchmark whose results are stale."""
    benches = [by_name(n) for n in names] if names else [b for b in BENCHMARKS if not b.excluded]
    return {b.name: reason for b in benches if (reason := stale_reason(b)) is not None}
