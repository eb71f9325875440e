"""The monitor reads a MIG instance's profile from its NVML name by the catalog's rule (``split_mig_name``, which
also reads `--gpu a100-80gb MIG 1g.10gb`): one rule, so the view, the exporter's GPU_I_PROFILE label and the
catalog never disagree on what is a profile (the monitor had its own regex: any word after "MIG", in any case)."""

from __future__ import annotations

import pytest

from gpuwise.catalog.resolve import split_mig_name
from gpuwise.monitor.sample import mig_profile

NAMES = ["NVIDIA A100-SXM4-80GB MIG 1g.10gb", "NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb", "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me",
         "NVIDIA A100-SXM4-40GB MIG 3G.20GB", "NVIDIA A100-SXM4-40GB mig 3g.20gb", "NVIDIA A100-SXM4-40GB MIG compute",
         "NVIDIA A100-SXM4-40GB", "", None]


@pytest.mark.parametrize("name", NAMES)
def test_the_monitor_reads_a_mig_profile_as_the_catalog_does(name):
    assert mig_profile(name) == (split_mig_name(name or "")[1] or "")


def test_a_whole_gpu_has_no_profile_and_a_slice_its_own():
    assert mig_profile("NVIDIA A100-SXM4-80GB MIG 1g.10gb") == "1g.10gb"
    assert mig_profile("NVIDIA A100-SXM4-80GB") == "" and mig_profile(None) == ""
