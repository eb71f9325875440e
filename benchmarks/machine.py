"""Speed benchmarks measure the machine: they refuse to write figures while other jobs load it.

On the shared 2-core build machine with eight engineers' jobs (load average 10-12) a measured eager
call took 7-30x its quiet-machine time: such a run would commit noise as a figure. A speed benchmark
calls ``require_quiet_machine()`` first; it exits with one line (and make bench lists it as failed,
to be re-run later) when the load average per core is above ``MAX_LOAD_PER_CORE``.
"""

from __future__ import annotations

import os
import sys

MAX_LOAD_PER_CORE = 1.0
BUSY_EXIT = 3
ALLOW_ENV = "GPUWISE_BENCH_ALLOW_LOAD"     # set to 1 to measure anyway (the load is written beside the figure)


def load_per_core() -> float:
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def require_quiet_machine(name: str) -> None:
    """Exit 3 with one line on stderr when the machine is too loaded for ``name`` to measure it."""
    load = load_per_core()
    if load > MAX_LOAD_PER_CORE and os.environ.get(ALLOW_ENV) != "1":
        print(f"{name}: load average {load:.1f} per core (> {MAX_LOAD_PER_CORE}): the machine is busy, its speed "
              f"would be measured wrongly; re-run when it is quiet (or set {ALLOW_ENV}=1)", file=sys.stderr)
        raise SystemExit(BUSY_EXIT)
