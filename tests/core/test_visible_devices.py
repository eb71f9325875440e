"""CUDA_VISIBLE_DEVICES has one reader of its syntax (``gpuwise.visible_devices``), which the guard and the report
apply each with its own policy: here the syntax itself, and that the two read a value of valid entries as the same
GPUs (before, each parsed it apart and they disagreed on "²", empty entries, upper-case UUIDs)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.guard.devices import FakeGpuSource, GpuState, select_gpus
from gpuwise.monitor.sample import GpuSample
from gpuwise.visible_devices import (VisibleEntry, matching_uuids, parse_entry, parse_visible_devices,
                                             uuid_named)
from gpuwise.report.sample_table import sample_table
from gpuwise.report.visible import cuda_visible_labels

GIB = 2**30
T_S = 1_700_000_000.0
UUIDS = ["GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "GPU-8a12bb00-0000-4106-c12f-20bd9faed9f6",
         "GPU-b0c1d2e3-1111-4106-c12f-20bd9faed9f6"]


@pytest.mark.parametrize("text, entry", [
    ("3", VisibleEntry("3", index=3)),
    ("  12 ", VisibleEntry("12", index=12)),
    ("-1", VisibleEntry("-1", index=-1)),                                      # names no device; CUDA stops there
    ("GPU-8932", VisibleEntry("GPU-8932", uuid_prefix="GPU-8932")),
    (" MIG-aa11 ", VisibleEntry("MIG-aa11", uuid_prefix="MIG-aa11")),
    ("MIG-GPU-8932f937/1/0", VisibleEntry("MIG-GPU-8932f937/1/0", uuid_prefix="GPU-8932f937", legacy_mig=True)),
    ("²", VisibleEntry("²", uuid_prefix="²")),                                 # a digit to str.isdigit, not to CUDA
    ("  ", VisibleEntry("")),
])
def test_an_entry_is_an_index_a_uuid_prefix_the_older_mig_form_or_empty(text, entry):
    assert parse_entry(text) == entry


def test_a_value_is_read_entry_by_entry_in_order_empty_ones_kept():
    assert [e.text for e in parse_visible_devices("1, GPU-ab,,MIG-cd,")] == ["1", "GPU-ab", "", "MIG-cd", ""]
    assert parse_visible_devices("") == (VisibleEntry(""),)


@pytest.mark.parametrize("text, names_mig", [("MIG-aa11", True), ("mig-aa11", True),
                                             ("MIG-GPU-8932f937/1/0", True), ("GPU-8932", False), ("3", False)])
def test_an_entry_says_whether_it_names_a_mig_instance(text, names_mig):
    assert parse_entry(text).names_mig is names_mig


@pytest.mark.parametrize("prefix, matches", [
    ("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", (UUIDS[0],)),    # a whole UUID
    ("GPU-89", (UUIDS[0],)),
    ("gpu-8A1", (UUIDS[1],)),                                      # case aside
    ("GPU-8", (UUIDS[0], UUIDS[1])),                               # two GPUs: several
    ("GPU-ff", ()),
    ("", ()),                                                      # an empty entry names no device, not every one
])
def test_a_uuid_prefix_matches_the_uuids_it_begins_case_aside(prefix, matches):
    assert matching_uuids(prefix, UUIDS + [None, ""]) == matches
    assert uuid_named(prefix, UUIDS) == (matches[0] if len(matches) == 1 else None)


def test_a_uuid_listed_twice_is_one_match():
    assert uuid_named("GPU-b0", [UUIDS[2], UUIDS[2].upper()]) == UUIDS[2]


def _box() -> list[GpuState]:
    return [GpuState(i, uuid, "NVIDIA A100-SXM4-80GB", 70 * GIB, 80 * GIB, 0.0) for i, uuid in enumerate(UUIDS)]


def _log_devices():
    """The same GPUs as a report sees them in a log."""
    return sample_table([GpuSample(t_s=T_S, gpu_index=i, uuid=uuid) for i, uuid in enumerate(UUIDS)]).devices()


# An entry naming one GPU of the box: its index, or a unique prefix of its UUID (any case, any whitespace around).
_ENTRY = st.tuples(st.integers(0, len(UUIDS) - 1), st.booleans(), st.integers(6, 40), st.booleans(),
                   st.sampled_from(["", " ", "\t"]))


def _written(index: int, by_uuid: bool, length: int, upper: bool, pad: str) -> str:
    text = (UUIDS[index][:length].upper() if upper else UUIDS[index][:length]) if by_uuid else str(index)
    return f"{pad}{text}{pad}"


@settings(max_examples=60, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=5))
def test_the_guard_and_the_report_read_a_value_of_valid_entries_as_the_same_gpus(entries):
    value = ",".join(_written(*e) for e in entries)
    named = {index for index, *_ in entries}
    env = {"CUDA_VISIBLE_DEVICES": value}
    chosen = select_gpus(len(named), source=FakeGpuSource(_box()), env=env)
    assert {g.index for g in chosen} == named
    assert cuda_visible_labels(value, _log_devices()) == {str(i) for i in named}
