"""What `gpuwise watch` narrows to: some GPUs, some users' processes, some process trees (nvitop's filters).

A GPU filter keeps those GPUs (and their MIG instances) in both tables; a user or pid filter keeps the
matching processes. A pid matches with its descendants, so ``--pid`` of a torchrun or a shell shows the
workers it started. With a user and a pid filter both given, a process must match both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.procs import ProcessRow, process_tree


@dataclass(frozen=True)
class WatchFilter:
    gpu_indices: frozenset[int] = frozenset()   # empty: every GPU
    users: frozenset[str] = frozenset()         # empty: every user
    pids: frozenset[int] = frozenset()          # empty: every process; else these and their descendants

    @property
    def narrows(self) -> bool:
        return bool(self.gpu_indices or self.users or self.pids)

    def keeps_gpu(self, gpu_index: int) -> bool:
        return not self.gpu_indices or gpu_index in self.gpu_indices

    def history(self, history: Mapping[tuple[int, int | None], Sequence]) -> dict[tuple[int, int | None], list]:
        """The per-GPU sample history of the GPUs kept (keys are (GPU index, MIG index))."""
        return {key: list(samples) for key, samples in history.items() if self.keeps_gpu(key[0])}

    def processes(self, rows: Iterable[ProcessRow] | None,
                  tree: Callable[[int], frozenset[int]] = process_tree) -> list[ProcessRow] | None:
        """The process rows kept; None stays None (the backend cannot list processes)."""
        if rows is None:
            return None
        pids: frozenset[int] = frozenset().union(*(tree(p) for p in self.pids)) if self.pids else frozenset()
        return [r for r in rows
                if self.keeps_gpu(r.gpu_index)
                and (not self.users or r.user in self.users)
                and (not pids or r.pid in pids)]

    def check_applies(self, rows: Sequence[ProcessRow] | None, source: str) -> None:
        """A user or pid filter needs the processes: over a backend that lists none (``rows`` None: a run log's
        replay, which keeps how many processes each device had, not whose), MonitorError (exit 2, one line)
        rather than a view titled "only user alice" that counts every user's processes."""
        if rows is not None or not (self.users or self.pids):
            return
        options = " ".join([*(f"--user {u}" for u in sorted(self.users)), *(f"--pid {p}" for p in sorted(self.pids))])
        raise MonitorError(f"{options}: {source} lists no processes (a run log keeps how many each device had, "
                           "not whose), so --user and --pid cannot apply here; --gpu still does")

    def describe(self) -> str:
        """A few words for the title ('' when nothing is filtered)."""
        parts = []
        if self.gpu_indices:
            parts.append("GPU " + ", ".join(str(i) for i in sorted(self.gpu_indices)))
        if self.users:
            parts.append("user " + ", ".join(sorted(self.users)))
        if self.pids:
            parts.append("pid " + ", ".join(str(p) for p in sorted(self.pids)) + " and children")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"gpu_indices": sorted(self.gpu_indices), "users": sorted(self.users), "pids": sorted(self.pids)}


def split_values(values: Iterable[str] | None) -> list[str]:
    """Repeated options and comma lists alike: ['0,1', '3'] -> ['0', '1', '3']."""
    return [v.strip() for value in (values or ()) for v in value.split(",") if v.strip()]
