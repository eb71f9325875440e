"""What `gpuwise watch` narrows to: some GPUs, some users' processes, some process trees (nvitop's filters).

A GPU filter keeps those GPUs (and their MIG instances) in both tables; a user or pid filter keeps the
matching processes. A pid matches with its descendants, so ``--pid`` of a torchrun or a shell shows the
workers it started. With a user and a pid filter both given, a process must match both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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
