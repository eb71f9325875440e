"""Which GPU memory belongs to the watched job: process trees and pid matching.

Inside a container NVML reports *host* process ids, which do not match the container's own ids (separate
pid namespaces). We cannot translate them without privileges, so the rule is:

- some NVML pid is one of the watched pids  -> the sum over the watched pids ("pid");
- none of the NVML pids is a live process here -> the pid namespaces differ: the sum over every compute
  process on that GPU ("all"; on a rented GPU the container is normally the only user);
- NVML lists no process at all (common in containers)  -> unknown (None): the report falls back to the
  GPU's memory used;
- NVML lists live local processes but none of ours  -> 0 ("pid"): the job does not use this GPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_memory_bytes: int | None   # None: the driver does not say (WDDM, no permission)


@dataclass(frozen=True)
class ProcessRow:
    """One compute process on one GPU, as the live view lists it (nvitop's PID, USER, GPU-MEM, COMMAND).

    ``user`` and ``command`` are None where the process is not visible here: inside a container NVML
    reports host pids, which this pid namespace does not hold.
    """

    gpu_index: int
    mig_index: int | None
    pid: int
    used_memory_bytes: int | None
    user: str | None
    command: str | None

    @property
    def gpu_label(self) -> str:
        return f"{self.gpu_index}" if self.mig_index is None else f"{self.gpu_index}/mig{self.mig_index}"

    def to_dict(self) -> dict:
        return {"gpu_index": self.gpu_index, "mig_index": self.mig_index, "pid": self.pid,
                "used_memory_bytes": self.used_memory_bytes, "user": self.user, "command": self.command}


def process_rows(gpu_index: int, mig_index: int | None, procs: Iterable[GpuProcess],
                 recorded: Mapping[int, Mapping[str, str | None]] | None = None) -> list[ProcessRow]:
    """The rows of one GPU's processes, largest memory first; user and command from ``recorded``
    (a replay file's), else from /proc."""
    rows = []
    for p in procs:
        known = (recorded or {}).get(p.pid)
        user, command = (known.get("user"), known.get("command")) if known else describe(p.pid)
        rows.append(ProcessRow(gpu_index, mig_index, p.pid, p.used_memory_bytes, user, command))
    return sorted(rows, key=lambda r: (-(r.used_memory_bytes or 0), r.pid))


def describe(pid: int) -> tuple[str | None, str | None]:
    """(user name, command line) of a local process from /proc; (None, None) when it is not visible."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None, None
    try:
        import pwd

        user = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        user = str(uid)
    if not argv:  # a kernel thread or a zombie: its name in brackets, as ps prints it
        try:
            with open(f"/proc/{pid}/comm") as f:
                argv = [f"[{f.read().strip()}]"]
        except OSError:
            argv = []
    return user, " ".join(argv) or None


def pid_exists(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def process_tree(root_pid: int) -> frozenset[int]:
    """``root_pid`` and all its descendants, from /proc (Linux); just the root elsewhere."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return frozenset({root_pid})
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields resume after the last ')'.
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) > 1:
            children.setdefault(int(rest[1]), []).append(int(entry))
    tree, todo = {root_pid}, [root_pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return frozenset(tree)


def attribute_memory(
    procs: Iterable[GpuProcess],
    watch_pids: Set[int] | None,
    exists: Callable[[int], bool] = pid_exists,
) -> tuple[int | None, str | None]:
    """(bytes that belong to the job, how they were matched) for one GPU; see the module docstring."""
    procs = list(procs)
    if not procs:
        return None, None
    known = [p for p in procs if p.used_memory_bytes is not None]
    if watch_pids is None:
        return (sum(p.used_memory_bytes for p in known) if known else None), "all"
    mine = [p for p in procs if p.pid in watch_pids]
    if mine:
        sized = [p.used_memory_bytes for p in mine if p.used_memory_bytes is not None]
        return (sum(sized) if sized else None), "pid"
    if not any(exists(p.pid) for p in procs):
        return (sum(p.used_memory_bytes for p in known) if known else None), "all"
    return 0, "pid"
