"""The trace cache and the files a user's factory reads: a config beside the model file (JSON, YAML, a
vocabulary) decides the model as much as its code does, so an edit to it traces again; what changes on
its own (/proc, a file opened for writing) never keeps a trace from being reused."""

from __future__ import annotations

import os

import pytest

from gpuwise.trace import cache, trace_workload
from gpuwise.workload import Workload

FACTORY = '''
import json
import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def factory(batch_size=2):
    with open(os.path.join(HERE, "model_config.json")) as f:
        width = json.load(f)["width"]
    with open(os.path.join(HERE, "build.log"), "a") as log:   # written, never read back: not a source
        log.write(f"built width {width}\\n")
    with open("/proc/self/stat") as f:   # different in every process: never a source
        f.read()
    return nn.Linear(width, 8), (torch.empty(batch_size, width),)
'''


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(tmp_path / "traces"))
    monkeypatch.delenv("GPUWISE_NO_CACHE", raising=False)


def _factory_reading_a_config(folder, width: int) -> Workload:
    (folder / "model_config.json").write_text(f'{{"width": {width}}}\n')
    (folder / "config_model.py").write_text(FACTORY)
    return Workload(f"{folder / 'config_model.py'}:factory", batch_size=2)


def test_editing_a_config_file_the_factory_reads_traces_again(tmp_path, cache_on):
    # was: the cache checked the factory's file and the modules it imports only, so a width changed in
    # the JSON config the factory reads kept serving the old trace (the old width's memory and time)
    workload = _factory_reading_a_config(tmp_path, width=8)
    assert trace_workload(workload).param_count == 8 * 8 + 8
    (tmp_path / "model_config.json").write_text('{"width": 32}\n')
    assert trace_workload(workload).param_count == 32 * 8 + 8


def test_a_factory_reading_proc_and_writing_a_log_is_still_served_from_the_cache(tmp_path, cache_on):
    workload = _factory_reading_a_config(tmp_path, width=8)
    first = trace_workload(workload)
    again = trace_workload(workload)
    assert again.trace_time_s == first.trace_time_s   # the stored trace, not a new one


def test_the_files_read_are_kept_with_their_digest_and_not_proc_or_a_file_written(tmp_path, cache_on):
    workload = _factory_reading_a_config(tmp_path, width=8)
    trace_workload(workload)
    [entry_file] = cache.cache_dir().glob("*.pickle")
    entry = cache.pickle.loads(entry_file.read_bytes())
    names = {p.rpartition("/")[2] for p, _ in entry.sources}
    assert {"config_model.py", "model_config.json"} <= names
    assert not {"stat", "build.log"} & names


def _rewritten_keeping_size_and_time(path, content: bytes) -> None:
    stat = path.stat()
    path.write_bytes(content)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_large_file_is_compared_by_size_and_time_a_small_one_by_content(tmp_path, monkeypatch):
    # a factory that opens a dataset of gigabytes to read its header must not cost a full read on every hit
    monkeypatch.setattr(cache, "HASHED_FILE_MAX_BYTES", 16)
    small, large = tmp_path / "small.txt", tmp_path / "large.bin"
    small.write_bytes(b"a" * 8)
    large.write_bytes(b"x" * 64)
    small_before, large_before = cache._file_digest(small), cache._file_digest(large)
    _rewritten_keeping_size_and_time(small, b"b" * 8)
    _rewritten_keeping_size_and_time(large, b"y" * 64)
    assert cache._file_digest(small) != small_before
    assert cache._file_digest(large) == large_before
    large.write_bytes(b"y" * 65)
    assert cache._file_digest(large) != large_before
