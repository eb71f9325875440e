"""The effective batch of ranks whose full batches differ (a loop of one's own that gives the last rank the
remainder, or ranks given other batch sizes) is the sum of the ranks' full batches, the same on every rank.

Before, each rank took its own full batch times the world size: ranks of 5 and 3 samples said 10 and 6, the
checkpoint recorded rank 0's 10, and a resume at 4 + 4 (the same 8 samples a step) warned that the checkpoint
was trained with 10.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpuwise.guard.checkpoint import CheckpointStore
from gpuwise.runlog import read_events

from .helpers import TWO_RANKS_FORKED, rank_reports, run_rank_job

# argv: directory, init file, then one phase per argument: the ranks' batch sizes of each step, "5+3,5+3" being
# two steps of 5 samples on rank 0 and 3 on rank 1. Each phase is a Guard that resumes the previous one's.
JOB = textwrap.dedent("""
    import datetime, json, os, sys
    import torch, torch.distributed as dist, torch.nn.functional as F
    from gpuwise.guard import Guard
    directory, init, phases = sys.argv[1], sys.argv[2], sys.argv[3:]

    def rank(r):
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{init}", rank=r, world_size=2,
                                timeout=datetime.timedelta(seconds=120))
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 3))
        said = []
        for i, phase in enumerate(phases):
            guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=1, keep=1,
                          run_log=os.path.join(directory, f"phase{i}.db"), verbose=False, measure_grad_noise=False)
            guard.resume()
            for step in phase.split(","):
                n = int(step.split("+")[r])
                guard.step((torch.randn(n, 8), torch.zeros(n, dtype=torch.long)),
                           lambda b: F.cross_entropy(model(b[0]), b[1]))
            guard.close()
            said.append({"effective_batch_size": guard.effective_batch_size, "samples_seen": guard.samples_seen})
        return {"phases": said}

""") + TWO_RANKS_FORKED


def _phases(tmp_path: Path, *phases: str) -> list[list[dict]]:
    """Per phase, what each rank said after it."""
    (tmp_path / "ck").mkdir()
    out, err, _ = run_rank_job(JOB, tmp_path / "ck", tmp_path / "init", *phases)
    said = rank_reports(out)
    assert len(said) == 2 and all("error" not in d for d in said), (said, err[-3000:])
    return [[d["phases"][i] for d in said] for i in range(len(phases))]


def _changed(tmp_path: Path, phase: int) -> list[str]:
    return [e["message"] for e in read_events(tmp_path / "ck" / f"phase{phase}.db")
            if e["kind"] == "effective_batch_changed"]


def test_ranks_of_other_batch_sizes_agree_on_the_sum_of_their_batches(tmp_path: Path) -> None:
    (first,) = _phases(tmp_path, "5+3,5+3,2+1")   # the last step: an epoch's short end on both ranks
    assert [d["effective_batch_size"] for d in first] == [8, 8]
    assert [d["samples_seen"] for d in first] == [19, 19]
    ckpt, _ = CheckpointStore(tmp_path / "ck").latest()
    assert ckpt.manifest.meta["effective_batch_size"] == 8


def test_a_resume_at_the_same_samples_per_step_split_otherwise_is_silent(tmp_path: Path) -> None:
    """5 + 3, then 4 + 4: the same 8 samples a step (nothing said); then 4 + 2: 6, said once naming both."""
    first, same, fewer = _phases(tmp_path, "5+3,5+3", "4+4,4+4", "4+2,4+2")
    assert [d["effective_batch_size"] for d in same] == [8, 8]
    assert _changed(tmp_path, 1) == []
    (said,) = _changed(tmp_path, 2)
    assert "trained with 8 samples" in said and "takes 6" in said and "2 to 4 per rank" in said, said
    assert [d["effective_batch_size"] for d in fewer] == [6, 6]


def test_a_rank_whose_batch_grows_after_the_first_step_is_counted(tmp_path: Path) -> None:
    """The ranks' full batches are learnt again when one of them changes: rank 1's grows from 3 to 4 at a step
    whose batches are equal on both ranks, and are kept through later steps (an epoch's short end, 2 + 2)."""
    (run,) = _phases(tmp_path, "5+3,4+4,4+4,2+2")
    assert [d["effective_batch_size"] for d in run] == [9, 9]
    assert [d["samples_seen"] for d in run] == [28, 28]
