"""A sharded (DCP) save keeps the rules of an unsharded one, decided alike on every rank, with two real rank processes
(gloo, CPU) writing one checkpoint:

- a NaN in one rank's shards is a failed save on every rank (the same one line), nothing written: before, the
  diverged state was saved, and such checkpoints pushed the finite ones out of ``keep``;
- a full disk (ENOSPC) on one rank, with two checkpoints kept, makes room (the oldest deleted) and saves again, on
  every rank; a disk that stays full is one ``GuardError`` line on every rank, nothing of the save left behind.
  Before, DCP's ``CheckpointException`` (a BaseException, which ``except Exception`` misses) came out of the save on
  both ranks, with the half-written temporary directory left behind. Once room made did not let a save through,
  no more is made until one is written.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from .helpers import run_rank_job

JOB = textwrap.dedent("""
    import datetime, errno, os, sys, torch
    import torch.distributed as dist
    import torch.distributed.checkpoint.filesystem as dcp_files
    from gpuwise.guard import CheckpointStore, GuardError
    from gpuwise.guard.sharded import save_sharded
    directory, init, scenario = sys.argv[1], sys.argv[2], sys.argv[3]

    def fill_disk(times):
        # this rank's shard writes fail with ENOSPC, the first ``times`` of them
        write, failed = dcp_files._write_item, [0]
        def full(*args, **kwargs):
            if failed[0] < times:
                failed[0] += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            return write(*args, **kwargs)
        dcp_files._write_item = full

    def rank(r):
        dist.init_process_group("gloo", init_method=f"file://{init}", rank=r, world_size=2,
                                timeout=datetime.timedelta(seconds=120))
        torch.manual_seed(0)
        model = torch.nn.Sequential(*(torch.nn.Linear(4, 4) for _ in range(4)))
        kept = 3 if scenario == "full-keep-3" else 2
        store = CheckpointStore(directory, keep=kept)
        for step in range(1, kept + 1):
            save_sharded(store, step, 0, model, None, {"step": step})
        if r == 1 and scenario == "nan":
            with torch.no_grad():
                model[3].weight[0, 0] = float("nan")
        if r == 1 and scenario.startswith("full"):
            fill_disk(1 if scenario == "full-once" else 10**9)
        for step in range(kept + 1, 2 * kept):   # one save, or two where three are kept
            try:
                saved = save_sharded(store, step, 0, model, None, {"step": step}) is not None
                said = "saved" if saved == (r == 0) else "?"
            except GuardError as exc:
                said = f"GuardError {exc}"
            except BaseException as exc:   # DCP's CheckpointException is one
                said = type(exc).__name__
            dist.barrier()
        return said

    children = []
    for r in range(2):
        pid = os.fork()
        if pid == 0:
            os.write(1, f"{r} {rank(r)}\\n".encode())
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
""")


def _ranks(directory: Path, scenario: str) -> tuple[list[str], str]:
    """What each of two ranks said of the last save (rank 0's first): of step 3 after steps 1 and 2, or of step 5
    after steps 1 to 4 with three kept (``full-keep-3``); stderr."""
    out, err, _ = run_rank_job(JOB, directory, directory.parent / "init", scenario)
    said = sorted(line for line in out.splitlines() if line[:2] in ("0 ", "1 "))
    assert len(said) == 2, err[-3000:]
    return [line[2:] for line in said], err


def _entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(("step-", ".tmp-", ".old-")))


def test_a_nan_in_one_ranks_shards_fails_the_save_on_every_rank(tmp_path):
    directory = tmp_path / "ck"
    said, _ = _ranks(directory, "nan")
    expected = (f"GuardError checkpoint of step 3 not written to {directory}: the state holds NaN/Inf values "
                "(model.3.weight), the run diverged; previous checkpoint step-000000002 is intact")
    assert said == [expected, expected]
    assert _entries(directory) == ["step-000000001", "step-000000002"]


def test_a_full_disk_on_one_rank_makes_room_and_every_rank_saves_again(tmp_path):
    directory = tmp_path / "ck"
    said, err = _ranks(directory, "full-once")
    assert said == ["saved", "saved"]
    assert _entries(directory) == ["step-000000002", "step-000000003"]
    assert err.count("deleted the oldest checkpoint(s) step-000000001 to make room") == 1   # rank 0 did, and said so


def test_a_disk_that_stays_full_is_one_guard_error_on_every_rank_and_leaves_nothing(tmp_path):
    directory = tmp_path / "ck"
    said, _ = _ranks(directory, "full")
    expected = (f"GuardError checkpoint of step 3 not written to {directory}: No space left on device; previous "
                "checkpoint step-000000002 is intact")
    assert said == [expected, expected]
    assert _entries(directory) == ["step-000000002"]   # the oldest made room; the retry failed too


def test_room_made_in_vain_on_a_disk_that_stays_full_deletes_nothing_more(tmp_path):
    """Three kept, the disk full from step 4 on: step 4 deletes step 1 and still fails; step 5 deletes nothing more
    (was: step 2 too, one checkpoint lost at every save down to the last)."""
    directory = tmp_path / "ck"
    said, _ = _ranks(directory, "full-keep-3")
    expected = (f"GuardError checkpoint of step 5 not written to {directory}: No space left on device; previous "
                "checkpoint step-000000003 is intact")
    assert said == [expected, expected]
    assert _entries(directory) == ["step-000000002", "step-000000003"]
