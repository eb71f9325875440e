"""The report reads a run log's CUDA_VISIBLE_DEVICES with the reader the guard uses (``gpuwise.visible_devices``). The
defects: an entry of a digit that is not ASCII ("²": ``str.isdigit`` says yes, ``int`` refuses it) ended the report
with a ValueError instead of ending the list, as CUDA does; the older MIG form in lower case named nothing though the
report matches every UUID case aside."""

from __future__ import annotations

import pytest

from gpuwise.monitor.sample import GpuSample
from gpuwise.report.sample_table import sample_table
from gpuwise.report.visible import cuda_visible_labels

T_S = 1_700_000_000.0


def _devices():
    """GPU 0 split into two MIG instances (its parent row beside them), GPU 1 whole, as the monitor samples them."""
    rows = [GpuSample(t_s=T_S, gpu_index=0, uuid="GPU-aaaa1111"), GpuSample(t_s=T_S, gpu_index=1, uuid="GPU-bbbb2222"),
            GpuSample(t_s=T_S, gpu_index=0, mig_index=0, uuid="MIG-cccc3333"),
            GpuSample(t_s=T_S, gpu_index=0, mig_index=1, uuid="MIG-dddd4444")]
    return sample_table(rows).devices()


@pytest.mark.parametrize("value, labels", [
    ("1,²,0", {"1"}),                                        # "²" names no device: the list ends there
    ("²", set()),
    ("mig-gpu-AAAA1111/1/0", {"0", "0/mig0", "0/mig1"}),    # the older MIG form, case aside as UUIDs are
    ("mig-DDDD", {"0/mig1"}),
])
def test_an_entry_no_device_answers_to_ends_the_list_and_case_never_matters(value, labels):
    assert cuda_visible_labels(value, _devices()) == labels
