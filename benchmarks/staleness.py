"""Whether a committed results file is older than what it measures: a hash of its declared inputs.

Stdlib only and hashing only (no benchmark is imported or run), so the check is cheap enough for a test.
An input is a path relative to the repository (a file, or a folder: every file under it that git tracks,
so a local scratch file or a generated one never enters a hash) or ``shared:<path>`` for the public data
in ``shared/data/public-benchmarks/``. Where that folder is absent (a clean clone in CI), the shared
inputs are left out of the comparison and only the repository's are checked.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
from pathlib import Path

from benchmarks.registry import BENCHMARKS, Benchmark, by_name

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SHARED_PREFIX = "shared:"
ABSENT = "absent"


DATA_ENV = "GPUWISE_BENCH_DATA"     # the public data folder, where it is not beside the checkout


def _shared_data(repo: Path = REPO) -> Path:
    """The public data: ``$GPUWISE_BENCH_DATA``; else ``shared/data/public-benchmarks`` in the checkout,
    beside it (/work/shared for /work/wt/<name>) or at /work/shared. The last is returned when none
    exists (``shared_data_present`` then says so)."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    for base in (repo / "shared", repo.parent / "shared", repo.parents[1] / "shared", Path("/work/shared")):
        if (base / "data" / "public-benchmarks").is_dir():
            return base / "data" / "public-benchmarks"
    return Path("/work/shared/data/public-benchmarks")


DATA = _shared_data()


def shared_data_present() -> bool:
    """Whether the public data folder is here; without it only the repository's inputs are compared."""
    return DATA.is_dir()


@functools.lru_cache(maxsize=1)
def _tracked() -> frozenset[str] | None:
    """Every file git tracks in the repository (posix paths relative to it); None outside a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return frozenset(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)


def _in_repo(p: Path) -> bool:
    """A file of the checkout that can enter a hash: tracked by git (any file outside a git checkout),
    never bytecode."""
    if "__pycache__" in p.parts or p.suffix == ".pyc":
        return False
    tracked = _tracked()
    if tracked is None or not p.is_relative_to(REPO):
        return True
    return p.relative_to(REPO).as_posix() in tracked


def _files(entry: str) -> list[tuple[str, Path | None]]:
    """(name recorded in the results file, path) of every file an input entry covers, sorted."""
    if entry.startswith(SHARED_PREFIX):
        root, rel = DATA, entry[len(SHARED_PREFIX):]
        label = lambda p: SHARED_PREFIX + p.relative_to(DATA).as_posix()  # noqa: E731
        keep = lambda p: True  # noqa: E731
    else:   # relative to the repository (an absolute path, as a test's, is kept as it is)
        root, rel = REPO, entry
        label = lambda p: p.relative_to(REPO).as_posix() if p.is_relative_to(REPO) else p.as_posix()  # noqa: E731
        keep = _in_repo
    path = root / rel
    if path.is_dir():
        found = [p for p in path.rglob("*") if p.is_file() and keep(p)]
    elif path.is_file() and keep(path):
        found = [path]
    else:
        found = []
    if not found:   # recorded as absent: the figure changes when it appears (benchmarks/measured/ from a GPU)
        return [(entry, None)]
    return sorted((label(p), p) for p in found)


def is_shared(name: str) -> bool:
    return name.startswith(SHARED_PREFIX)


def untracked_inputs(bench: Benchmark) -> list[str]:
    """Files of ``bench``'s inputs that exist here but git does not track yet (and does not ignore): a hash
    leaves them out (a clean clone has none of them), so results written now read stale once they are
    committed, and the re-run scores a held-out set again. ``benchmarks.run`` refuses to run until then."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    others = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
    entries = [e.rstrip("/") for e in bench.all_inputs() if not is_shared(e)]
    return sorted(p for p in others if any(p == e or p.startswith(e + "/") for e in entries))


def input_hashes(bench: Benchmark) -> dict[str, str]:
    """sha256 of every input file of ``bench``: its script, the harness and what it declares. Without the
    public data folder (``shared_data_present``) its entries are left out: they cannot be hashed here."""
    out = {}
    shared = shared_data_present()
    for entry in bench.all_inputs():
        if is_shared(entry) and not shared:
            continue
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
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    rerun = f"re-run: python -m benchmarks.run {bench.name}"
    if not path.exists():
        return f"{shown} is missing ({rerun})"
    recorded = json.loads(path.read_text()).get("inputs", {})
    current = input_hashes(bench)
    if not shared_data_present():   # a clean clone without the public data: compare the repository's inputs
        recorded = {n: h for n, h in recorded.items() if not is_shared(n)}
    if recorded == current:
        return None
    changed = sorted(n for n in current.keys() & recorded.keys() if current[n] != recorded[n])
    added, removed = sorted(current.keys() - recorded.keys()), sorted(recorded.keys() - current.keys())
    parts = [f"changed {', '.join(changed[:4])}{' …' if len(changed) > 4 else ''}" if changed else "",
             f"new {', '.join(added[:4])}{' …' if len(added) > 4 else ''}" if added else "",
             f"gone {', '.join(removed[:4])}{' …' if len(removed) > 4 else ''}" if removed else ""]
    return (f"{shown} is older than its inputs ({'; '.join(p for p in parts if p)}; "
            f"{rerun})")


def stale(names: list[str] | None = None) -> dict[str, str]:
    """{benchmark name: reason} of every run-by-``make bench`` benchmark whose results are stale."""
    benches = [by_name(n) for n in names] if names else [b for b in BENCHMARKS if not b.excluded]
    return {b.name: reason for b in benches if (reason := stale_reason(b)) is not None}
