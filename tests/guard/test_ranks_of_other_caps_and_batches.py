"""Two real gloo ranks (forked, CPU) that step batches of other sizes, or hold other micro-batch caps:

- ranks whose caps differ (``micro_batch_size=`` is a rank's own) step together; before, a rank compared the agreed
  size with its own cap, and the ranks' collectives parted (gloo "Connection closed", or a timeout);
- an OOM while the ranks' batches differ in size, such that the split would give them different numbers of
  micro-batches, is one ``GuardError`` line on every rank; before, gloo aborted the process (SIGABRT) mid-step.
"""

from __future__ import annotations

import textwrap

from .helpers import TWO_RANKS_FORKED, rank_reports, run_rank_job

JOB = textwrap.dedent("""
    import datetime, json, os, sys
    import torch, torch.distributed as dist, torch.nn.functional as F
    from gpuwise.guard import Guard
    from gpuwise.guard.oom import inject_oom_above
    directory, init, scenario = sys.argv[1], sys.argv[2], sys.argv[3]

    def rank(r):
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{init}", rank=r, world_size=2,
                                timeout=datetime.timedelta(seconds=120))
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 3))
        caps = scenario == "other_caps"
        kw = {"micro_batch_size": 8} if caps and r == 0 else {}
        guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False,
                      measure_grad_noise=False, **kw)
        loss_fn = lambda b: F.cross_entropy(model(b[0]), b[1])
        n = 4 if caps or r == 1 else 8
        if scenario == "uneven_oom" and r == 0:
            loss_fn = inject_oom_above(loss_fn, 4)   # 8 and 4 samples at 4 a micro-batch: 2 and 1 micro-batches
        for _ in range(3):
            guard.step((torch.randn(n, 8), torch.zeros(n, dtype=torch.long)), loss_fn)
        guard.close()
        return {"samples_seen": guard.samples_seen}

""") + TWO_RANKS_FORKED


def _ranks(tmp_path, scenario: str) -> list[dict]:
    out, err, _ = run_rank_job(JOB, tmp_path / "ck", tmp_path / "init", scenario)
    said = rank_reports(out)
    assert len(said) == 2, err[-3000:]
    return said


def test_ranks_whose_caps_differ_step_together(tmp_path):
    """Rank 0 capped at 8, rank 1 uncapped, 4 samples each: no rank ran out, so every rank goes on."""
    said = _ranks(tmp_path, "other_caps")
    assert [d.get("error") for d in said] == [None, None]
    assert [d["samples_seen"] for d in said] == [24, 24]


def test_an_oom_splitting_uneven_batches_into_other_counts_is_one_guard_error_on_every_rank(tmp_path):
    said = _ranks(tmp_path, "uneven_oom")
    errors = {d.get("error") for d in said}
    assert len(errors) == 1, said
    (error,) = errors
    assert error.startswith("GuardError: step 1: out of memory") and "4 to 8 samples" in error
    assert "same batch size" in error and "\n" not in error
