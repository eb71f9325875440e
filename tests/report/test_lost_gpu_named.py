"""The note of a GPU that fell off the bus names it, and says when it was not one of the job's. The replay
fixture's idle GPU 1, lost mid-run beside the job's GPU 0, read `a GPU fell off the bus during the run` under a
header of `1 × NVIDIA A100`: as if the job's one GPU had been lost. Run logs written through the monitor's
Sampler over a ReplayBackend."""

from __future__ import annotations

from gpuwise.report import build_report
from tests.report.helpers import gpuwise_run_log

GIB = 2**30


def _frames(lost_index: int) -> list[list[dict]]:
    """12 samples of a busy GPU 0 and an idle GPU 1; GPU ``lost_index`` falls off the bus at the 6th."""
    def gpu(index: int, k: int) -> dict:
        busy = index == 0
        return {"t_s": 100.0 + k, "gpu_index": index, "name": "NVIDIA A100-SXM4-40GB",
                "utilization_pct": 80.0 if busy else 0.0, "memory_used_bytes": (12 if busy else 0) * GIB,
                "memory_total_bytes": 40 * GIB, "lost": int(index == lost_index and k >= 6)}
    return [[gpu(0, k), gpu(1, k)] for k in range(12)]


def _lost_notes(tmp_path, catalog, lost_index: int) -> list[str]:
    report = build_report(gpuwise_run_log(tmp_path / f"lost{lost_index}.db", _frames(lost_index)), catalog)
    return [n for n in report.notes if "fell off the bus" in n]


def test_a_lost_gpu_that_was_not_the_jobs_is_named_and_said_not_the_jobs(tmp_path, catalog):
    assert _lost_notes(tmp_path, catalog, 1) == [
        "GPU 1, not one of the job's, fell off the bus during the run (lost): its samples end there"]


def test_a_lost_gpu_of_the_job_is_named(tmp_path, catalog):
    assert _lost_notes(tmp_path, catalog, 0) == ["GPU 0 fell off the bus during the run (lost): its samples end there"]
