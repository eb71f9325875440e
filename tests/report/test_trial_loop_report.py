"""What a new user's trial of run → report found: a run log without per-process memory (a container) got no
memory comparison while the same figures from an nvidia-smi CSV were compared and flagged; `report --html` wrote
its file 0600 whatever the umask, and reset an existing file's mode."""

from __future__ import annotations

import os
import stat

from gpuwise.report import build_report
from gpuwise.report.html import write_html
from gpuwise.workload import Workload

from tests.report.helpers import sampler_log

MIB = 2**20
A100 = "NVIDIA A100-SXM4-40GB"
USED_MIB = 12000
HEADER = "timestamp, name, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n"
# A job gpuwise puts at 50+ GiB: the 12000 MiB the GPU used is far from it, so the report flags the workload
FAR = Workload("hf:meta-llama/Llama-2-7b-hf", finetune="lora", seq_len=1024, batch_size=4)


def smi_csv(path):
    rows = "".join(f"2026/11/20 10:00:{s:02d}.000, {A100}, 0, 60 %, {USED_MIB} MiB, 40960 MiB, 150.00 W\n"
                   for s in range(0, 60, 10))
    path.write_text(HEADER + rows)
    return path


def run_log_without_process_memory(path, workload: Workload):
    """`gpuwise run --model …` in a container: NVML gives the GPU's used memory, no per-process figure."""
    frames = [[{"t_s": 10.0 * k, "gpu_index": 0, "name": A100, "utilization_pct": 60.0,
                "memory_used_bytes": USED_MIB * MIB, "memory_total_bytes": 40960 * MIB, "power_w": 150.0}]
              for k in range(6)]
    return sampler_log(path, frames, meta={"workload": workload.to_dict()})


def _total(report):
    return next(f for f in report.predicted_vs_measured.figures if f.name == "nvidia-smi total")


def test_a_run_log_without_process_memory_compares_the_gpus_used_memory_as_the_csv_does(tmp_path, catalog):
    from_log = build_report(run_log_without_process_memory(tmp_path / "run.db", FAR), catalog)
    from_csv = build_report(smi_csv(tmp_path / "smi.csv"), catalog, workload=FAR)
    log_total, csv_total = _total(from_log), _total(from_csv)
    assert log_total.measured == csv_total.measured == from_log.usage.needed_peak_bytes == USED_MIB * MIB
    assert log_total.measured_basis == csv_total.measured_basis == "used"
    assert log_total.label == "nvidia-smi total (GPU memory used)"
    assert log_total.to_dict()["measured_basis"] == "used"
    for report in (from_log, from_csv):     # the same "probably not the job" check on both
        assert any("describe the job that ran" in n for n in report.notes), report.notes


def test_html_report_gets_a_new_files_mode_and_keeps_an_existing_ones(tmp_path, catalog):
    report = build_report(smi_csv(tmp_path / "smi.csv"), catalog)
    before = os.umask(0o027)
    try:
        new = write_html(report, tmp_path / "new.html")
        assert stat.S_IMODE(new.stat().st_mode) == 0o640
        kept = tmp_path / "kept.html"
        kept.write_text("old")
        kept.chmod(0o604)
        write_html(report, kept)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and kept.read_text() != "old"
    finally:
        os.umask(before)
