"""Run the benchmarks: all of them (``make bench``), some by name, or only the stale ones.

    python -m benchmarks.run                 # every benchmark of benchmarks/registry.py, in its order
    python -m benchmarks.run calibrate_accuracy time_stack
    python -m benchmarks.run --stale         # only those whose results are older than their inputs
    python -m benchmarks.run --list          # each benchmark, its minutes, fresh / stale / excluded, the total
    python -m benchmarks.run --check         # exit 1 when any results file is stale; runs nothing

Each script runs in its own interpreter (``python -m benchmarks.<name> <args>``) from the repository
root. With ``--stale`` a benchmark's staleness is checked just before it would run, so one that an
earlier script made stale (``kernel_laws`` rewrites the shipped laws) is run in the same pass.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import time

from benchmarks.machine import BUSY_EXIT
from benchmarks.registry import BENCHMARKS, Benchmark, by_name
from benchmarks.staleness import DATA, REPO, shared_data_present, stale_reason, untracked_inputs

log = logging.getLogger("benchmarks.run")


def _run(bench: Benchmark) -> tuple[int, float]:
    cmd = [sys.executable, "-m", f"benchmarks.{bench.name}", *bench.args]
    log.info("running %s", " ".join(cmd[1:]))
    start = time.monotonic()
    rc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL).returncode
    return rc, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="benchmarks to run (default: every one make bench runs)")
    ap.add_argument("--stale", action="store_true", help="run only the stale ones")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and whether each is fresh")
    ap.add_argument("--check", action="store_true", help="exit 1 if any results file is stale")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        chosen = [by_name(n) for n in args.names] if args.names else [b for b in BENCHMARKS if not b.excluded]
    except KeyError as e:
        print(e.args[0], file=sys.stderr)
        return 2
    if args.list or args.check:
        reasons = {b.name: stale_reason(b) for b in chosen if not b.excluded}
        if args.list:
            listed = BENCHMARKS if not args.names else chosen
            for b in listed:
                state = f"excluded: {b.excluded}" if b.excluded else (reasons.get(b.name) or "fresh")
                minutes = f"~{b.minutes:g} min ({b.timed})" if not b.excluded else ""
                print(f"{b.name:22s} {minutes:>20s}  {state}")
            run = [b for b in listed if not b.excluded]
            print(f"{'total':22s} {'~' + format(sum(b.minutes for b in run), '.0f') + ' min':>20s}  "
                  f"({len(run)} benchmarks, one after the other on the 2-core build machine; "
                  f"{sum(b.minutes for b in run if reasons.get(b.name)):.0f} min of them stale)")
        if not shared_data_present():
            print(f"note: no public data at {DATA} (set GPUWISE_BENCH_DATA): only the repository's inputs "
                  "were compared", file=sys.stderr)
        stale = [r for r in reasons.values() if r]
        if args.check:
            print("\n".join(stale) if stale else "every results file is fresh")
        return 1 if args.check and stale else 0
    untracked = sorted({f for b in chosen if not b.excluded for f in untracked_inputs(b)})
    if untracked:
        print(f"not run: {', '.join(untracked)} not committed (results written now would read stale after the "
              "commit, and the re-run would score a held-out set again); commit first", file=sys.stderr)
        return 2
    timings, failed = [], []
    total = time.monotonic()
    for bench in chosen:
        if bench.excluded:
            print(f"{bench.name}: not run ({bench.excluded})", file=sys.stderr)
            continue
        if args.stale and stale_reason(bench) is None:
            continue
        rc, seconds = _run(bench)
        timings.append((bench.name, seconds, rc))
        if rc:
            failed.append(bench.name)
    for name, seconds, rc in timings:
        state = {0: "", BUSY_EXIT: "  not measured: the machine is busy (benchmarks/machine.py)"}.get(rc, f"  FAILED (exit {rc})")
        print(f"{name:22s} {seconds:7.1f} s{state}")
    print(f"{'total':22s} {time.monotonic() - total:7.1f} s ({len(timings)} benchmarks)")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
