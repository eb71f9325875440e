"""``samples_seen`` counts the samples the whole job trained (every rank), through a change of the world size: a
run on 2 real ranks, resumed on 3. It counted one rank's samples: 48 steps on 2 ranks then 27 on 3 (batch 1 per
rank) read 75, where 48 * 2 + 27 * 3 = 177 samples were trained.

Each rank reports the samples it passed to ``guard.step``; the job's true total is their sum over all runs. The
runs cover an epoch's short last batch, OOM-split micro-batches (rank 1's batches retried as micro-batches of 1:
counted once) and, in a run of its own, a step of the user's own whose ranks hold different batches (rank r: r + 1
samples). Different batches per rank with a micro-batch split in force remain unsupported: the ranks would run
different numbers of micro-batches."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpuwise.guard import CheckpointStore

from .helpers import rank_reports, run_rank_job

JOB = textwrap.dedent("""
    import datetime, json, os, sys, traceback
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from gpuwise.guard import Guard
    from gpuwise.guard.oom import inject_oom_above

    directory, init, world, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    uneven_step, oom_on_rank_1 = sys.argv[5] == "1", sys.argv[6] == "1"

    def rank(r):
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{init}", rank=r, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 3))
        guard = Guard(directory, model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False,
                      measure_grad_noise=False)
        g = torch.Generator().manual_seed(0)
        data = torch.utils.data.TensorDataset(torch.randn(20, 8, generator=g), torch.randint(0, 3, (20,), generator=g))
        guard.loader(data, batch_size=3, seed=0)    # 20 samples: each rank's epoch ends on a short batch
        guard.resume()
        loss_fn = lambda b: F.cross_entropy(model(b[0]), b[1])
        if oom_on_rank_1 and r == 1:
            loss_fn = inject_oom_above(loss_fn, 1)  # rank 1's batches are retried as micro-batches of 1
        stepped = 0
        for batch in guard.batches(max_steps=max_steps):
            guard.step(batch, loss_fn)
            stepped += len(batch[0])
        if uneven_step:   # a loop of the user's own whose ranks hold different batches
            guard.step((torch.randn(r + 1, 8), torch.zeros(r + 1, dtype=torch.long)), loss_fn)
            stepped += r + 1
        guard.close()
        dist.barrier()
        dist.destroy_process_group()
        return {"rank": r, "stepped": stepped, "samples_seen": guard.samples_seen}

    children = []
    for r in range(world):   # one torch import, real rank processes (forked, as torchrun's would be spawned)
        pid = os.fork()
        if pid == 0:
            try:
                os.write(1, (json.dumps(rank(r)) + "\\n").encode())   # one write per line: no interleaving
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        children.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    sys.exit(1 if any(codes) else 0)
""")


def _run(directory: Path, init: Path, world: int, max_steps: int, *, uneven_step: bool,
         oom_on_rank_1: bool) -> list[dict]:
    """One run of the job on ``world`` ranks: each rank's samples stepped and ``samples_seen`` at its end."""
    out, err, code = run_rank_job(JOB, directory, init, world, max_steps, int(uneven_step), int(oom_on_rank_1))
    assert code == 0, err
    reports = rank_reports(out)
    assert [d["rank"] for d in reports] == list(range(world)), out + err
    return reports


def _saved_samples_seen(directory: Path) -> tuple[int, int]:
    """The newest checkpoint's samples_seen: in its state (what a resume reads) and in its manifest's meta."""
    store = CheckpointStore(directory)
    ckpt, _ = store.latest()
    return int(store.load_state(ckpt)["progress"]["samples_seen"]), int(ckpt.manifest.meta["samples_seen"])


@pytest.mark.slow
def test_samples_seen_is_every_ranks_samples_after_resuming_on_more_ranks(tmp_path):
    ckpt = tmp_path / "ckpt"
    first = _run(ckpt, tmp_path / "init-2", world=2, max_steps=6, uneven_step=False, oom_on_rank_1=False)
    trained_first = sum(d["stepped"] for d in first)
    assert trained_first > first[0]["stepped"]  # both ranks trained: one rank's count is not the job's
    assert {d["samples_seen"] for d in first} == {trained_first}
    assert _saved_samples_seen(ckpt) == (trained_first, trained_first)

    second = _run(ckpt, tmp_path / "init-3", world=3, max_steps=10, uneven_step=False, oom_on_rank_1=True)
    trained = trained_first + sum(d["stepped"] for d in second)
    assert {d["samples_seen"] for d in second} == {trained}
    assert _saved_samples_seen(ckpt) == (trained, trained)


@pytest.mark.slow
def test_ranks_with_different_batches_step_together_and_count_every_sample(tmp_path):
    """A loop of the user's own whose ranks got batches of different sizes (rank r: r + 1 samples), no micro-batch
    split in force: the smaller batch read as an OOM to the larger one's rank, which retried the step alone (the
    ranks' collectives mismatched: a crash or a hang)."""
    ckpt = tmp_path / "ckpt"
    ranks = _run(ckpt, tmp_path / "init-2", world=2, max_steps=2, uneven_step=True, oom_on_rank_1=False)
    trained = sum(d["stepped"] for d in ranks)
    assert {d["samples_seen"] for d in ranks} == {trained}
    assert _saved_samples_seen(ckpt) == (trained, trained)
