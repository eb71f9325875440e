"""A review of the change that said and priced the GPUs idle beside a `gpuwise run` job: NVML lists every GPU of the
node whatever CUDA_VISIBLE_DEVICES says, so on a shared node (SLURM giving a job 2 of 8 GPUs, a lab box where the
user runs on GPUs 0-1) the other users' GPUs were priced as the user's idle rentals ("6 of the 8 GPUs in the log were
idle the whole run …: you paid for 8"). `gpuwise run` now records what the job could see (``cuda_visible_devices``)
and the report counts as idle only those GPUs; a log without the record counts none idle beside the job's processes,
as before that change."""

from __future__ import annotations

import pytest

from gpuwise.monitor.sample import GpuSample
from gpuwise.report import build_report
from gpuwise.report.sample_table import sample_table
from gpuwise.report.visible import cuda_visible_labels

from tests.report.helpers import one_line, text_of
from tests.report.test_trial3_idle_gpus_and_timeline_legend import (NOT_RECORDED, UNSET, idle_gpu, job_gpu,
                                                                    other_job_gpu, run_log)

PRICE_PER_GPU_H = (10.0, "CNY")
UUIDS = [f"GPU-{k}{k}8932f9-d72c-4106-c12f-20bd9faed9f{k}" for k in range(8)]


def with_uuid(kind):
    """``kind``'s rows with a real-looking UUID per GPU (``UUIDS``), as NVML gives them."""
    return lambda t_s, index: {**kind(t_s, index), "uuid": UUIDS[index]}


def without_process_info(kind):
    """``kind``'s rows as a container whose driver gives no per-process memory records them."""
    return lambda t_s, index: {**kind(t_s, index), "process_memory_bytes": None, "process_count": None,
                               "process_match": None}


TWO_OF_EIGHT = [job_gpu] * 2 + [idle_gpu] * 6   # the job on GPUs 0-1; 2-7 nothing of this job, nothing running


def test_gpus_outside_cuda_visible_devices_are_neither_idle_nor_priced(tmp_path, catalog):
    report = build_report(run_log(tmp_path / "shared.db", TWO_OF_EIGHT, visible="0,1"), catalog,
                          gpu_price=PRICE_PER_GPU_H)
    assert report.usage.job_labels == ("0", "1")
    assert report.usage.idle_labels == ()
    assert report.usage.unseen_labels == tuple(str(k) for k in range(2, 8))
    assert report.right_sizing.gpu_count == 2
    assert not report.right_sizing.idle_gpus_cost_per_hour
    text = one_line(text_of(report))
    assert "idle the whole run" not in text and "(of 8" not in text
    assert "2 × NVIDIA A100" in text.split("Memory")[0]
    assert "the log holds 6 GPUs the job could not see (GPUs 2-7: outside CUDA_VISIBLE_DEVICES=0,1)" in text
    assert "Rented: 2 × NVIDIA A100" in text


def test_with_cuda_visible_devices_unset_the_gpus_idle_beside_the_job_are_said_and_priced(tmp_path, catalog):
    report = build_report(run_log(tmp_path / "rented.db", TWO_OF_EIGHT, visible=UNSET), catalog,
                          gpu_price=PRICE_PER_GPU_H)
    assert report.usage.idle_labels == tuple(str(k) for k in range(2, 8))
    assert report.usage.unseen_labels == ()
    assert report.right_sizing.gpu_count == 2
    assert report.right_sizing.idle_gpus_cost_per_hour == pytest.approx(6 * PRICE_PER_GPU_H[0])
    text = one_line(text_of(report))
    assert "6 of the 8 GPUs in the log were idle the whole run (GPUs 2-7" in text
    assert "Rented: 8 × NVIDIA A100" in text and "could not see" not in text


def test_a_run_log_that_does_not_record_what_the_job_could_see_counts_no_gpu_idle(tmp_path, catalog):
    report = build_report(run_log(tmp_path / "older.db", TWO_OF_EIGHT, visible=NOT_RECORDED), catalog,
                          gpu_price=PRICE_PER_GPU_H)
    assert report.usage.job_labels == ("0", "1")
    assert report.usage.idle_labels == () and report.usage.unseen_labels == ()
    text = one_line(text_of(report))
    assert "idle the whole run" not in text and "Rented: 2 × NVIDIA A100" in text


def test_gpu_uuids_and_their_prefixes_name_the_gpus_the_job_could_see(tmp_path, catalog):
    kinds = [with_uuid(k) for k in [idle_gpu] * 3 + [job_gpu, idle_gpu, job_gpu, idle_gpu, idle_gpu]]
    visible = f"{UUIDS[3]},{UUIDS[5][:12]},{UUIDS[6]}"    # a unique prefix names a GPU, as for CUDA
    report = build_report(run_log(tmp_path / "uuids.db", kinds, visible=visible), catalog, gpu_price=PRICE_PER_GPU_H)
    assert report.usage.job_labels == ("3", "5")
    assert report.usage.idle_labels == ("6",)
    assert report.usage.unseen_labels == ("0", "1", "2", "4", "7")
    assert report.right_sizing.idle_gpus_cost_per_hour == pytest.approx(PRICE_PER_GPU_H[0])


def test_without_process_memory_another_users_busy_gpus_outside_the_visible_ones_are_not_the_jobs(tmp_path, catalog):
    kinds = [without_process_info(job_gpu)] * 2 + [without_process_info(other_job_gpu)] * 3 + \
        [without_process_info(idle_gpu)] * 3
    report = build_report(run_log(tmp_path / "container.db", kinds, visible="0,1,5"), catalog,
                          gpu_price=PRICE_PER_GPU_H)
    assert report.usage.job_labels == ("0", "1")
    assert report.usage.idle_labels == ("5",)
    assert report.right_sizing.gpu_count == 2


def test_a_job_whose_visible_gpus_idled_beside_another_users_busy_ones_ran_nothing(tmp_path, catalog):
    kinds = [without_process_info(idle_gpu)] * 2 + [without_process_info(other_job_gpu)] * 6
    report = build_report(run_log(tmp_path / "nothing.db", kinds, visible="0,1"), catalog)
    assert report.usage.job_labels == ("0", "1")
    assert report.usage.nothing_ran and report.right_sizing is None


def mig_devices():
    """GPU 0 split into two MIG instances (its parent row beside them), GPU 1 whole, as the monitor samples them."""
    rows = [GpuSample(t_s=T, gpu_index=0, uuid="GPU-aaaa1111"), GpuSample(t_s=T, gpu_index=1, uuid="GPU-bbbb2222"),
            GpuSample(t_s=T, gpu_index=0, mig_index=0, uuid="MIG-cccc3333"),
            GpuSample(t_s=T, gpu_index=0, mig_index=1, uuid="MIG-dddd4444")]
    return sample_table(rows).devices()


T = 1_700_000_000.0


@pytest.mark.parametrize("value, labels", [
    ("MIG-dddd", {"0/mig1"}),                               # a MIG instance by its UUID's prefix
    ("GPU-aaaa1111", {"0", "0/mig0", "0/mig1"}),            # a GPU brings its MIG instances
    ("MIG-GPU-aaaa1111/1/0", {"0", "0/mig0", "0/mig1"}),    # the older MIG form: its GPU's instances
    ("1, 0", {"0", "0/mig0", "0/mig1", "1"}),
    ("1,-1,0", {"1"}),                                      # CUDA ignores an invalid entry and those after it
    ("GPU-", set()),                                        # a prefix of more than one GPU names none
    ("", set()),
])
def test_cuda_visible_devices_is_read_as_cuda_reads_it(value, labels):
    assert cuda_visible_labels(value, mig_devices()) == labels
