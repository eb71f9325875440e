"""A device's label is written in one place (``GpuSample.label``) and read back by one rule (``MIG_LABEL``), which
the report uses to put MIG instances under their GPU: the two cannot disagree."""

from __future__ import annotations

from gpuwise.monitor.sample import MIG_LABEL, GpuSample
from gpuwise.report.usage import gpu_labels


def test_a_mig_instance_label_reads_back_as_its_gpu_and_instance():
    label = GpuSample(t_s=0.0, gpu_index=7, mig_index=2).label
    match = MIG_LABEL.fullmatch(label)
    assert match is not None and (int(match["gpu"]), int(match["instance"])) == (7, 2)


def test_a_whole_gpu_label_is_no_mig_label():
    assert MIG_LABEL.fullmatch(GpuSample(t_s=0.0, gpu_index=12).label) is None


def test_the_report_words_labels_written_by_the_monitor():
    labels = [GpuSample(t_s=0.0, gpu_index=i).label for i in range(4)]
    labels += [GpuSample(t_s=0.0, gpu_index=7, mig_index=m).label for m in (0, 1)]
    assert gpu_labels(labels) == "GPUs 0-3 and GPU 7's MIG instances 0, 1"
