"""A family name (`a100`, `v100`, `h100`) never silently picks one GPU of the family: it lists them."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from gpuwise.catalog import builtin_catalog, resolve_gpu
from gpuwise.catalog.resolve import AmbiguousGpuName, name_key

CATALOG = builtin_catalog()


@pytest.mark.parametrize("family, members", [
    ("a100", {"a100-40gb-pcie", "a100-40gb-sxm4", "a100-80gb-pcie", "a100-80gb-sxm4"}),
    ("A100", {"a100-40gb-pcie", "a100-40gb-sxm4", "a100-80gb-pcie", "a100-80gb-sxm4"}),
    ("v100", {"v100-16gb-sxm2", "v100-32gb-sxm2", "v100-16gb-pcie", "v100-32gb-pcie", "v100s"}),
    ("h100", {"h100-pcie", "h100-nvl", "h100-sxm"}),
    ("a800", {"a800-80gb-pcie", "a800-80gb-sxm4"}),
    ("a100-40", {"a100-40gb-pcie", "a100-40gb-sxm4"}),
])
def test_a_family_name_is_ambiguous_and_lists_every_member(family, members):
    with pytest.raises(AmbiguousGpuName) as info:
        resolve_gpu(CATALOG, family)
    assert set(info.value.candidates) == members
    assert all(m in str(info.value) for m in members)


@pytest.mark.parametrize("name, gpu_id", [
    ("a10", "a10"), ("l4", "l4"), ("h20", "h20"), ("rtx-4090", "rtx-4090"), ("4090", "rtx-4090"),
    ("a100-40gb-sxm4", "a100-40gb-sxm4"), ("NVIDIA A100-SXM4-40GB", "a100-40gb-sxm4"), ("Tesla_T4", "t4"),
])
def test_exact_names_that_start_other_names_still_resolve(name, gpu_id):
    assert resolve_gpu(CATALOG, name).id == gpu_id


def test_no_alias_is_the_family_name_of_several_gpus():
    # A family is the first word of several canonical ids (a100-40gb-pcie, a100-80gb-sxm4, ...): an alias
    # equal to it would pick one member silently.
    first_words = Counter(g.id.split("-")[0] for g in CATALOG.gpus)
    families = {name_key(w) for w, n in first_words.items() if n > 1}
    assert {"a100", "v100", "h100", "a800"} <= families
    offending = {(a, g.id) for g in CATALOG.gpus for a in g.aliases if name_key(a) in families}
    assert not offending


def test_gpus_a100_exits_2_listing_the_candidates_and_prints_nothing_on_stdout():
    result = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "gpus", "a100"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert "ambiguous" in result.stderr and "a100-40gb-sxm4" in result.stderr and "a100-80gb-pcie" in result.stderr
    assert result.stderr.count("\n") == 1
