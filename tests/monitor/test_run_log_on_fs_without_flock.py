"""`gpuwise run --log PATH` (and `watch --log`, `exporter --log`) on a file system that does not do flock (an NFS
mount without lockd, some FUSE mounts: a rented machine's network disk) was refused every time with "--log PATH is
being written by another run", though no other run existed: flock's ENOLCK read as a lock held. The run now goes
on, unlocked, with a warning; a lock another run holds is still refused."""

from __future__ import annotations

import errno
import fcntl
import logging
import types

import pytest

from gpuwise.monitor import new_log
from gpuwise.monitor.errors import MonitorError
from gpuwise.monitor.new_log import create_new_log


def _no_flock(*_args):
    raise OSError(errno.ENOLCK, "No locks available")


@pytest.fixture
def fs_without_flock(monkeypatch):
    monkeypatch.setattr(new_log, "fcntl", types.SimpleNamespace(flock=_no_flock, LOCK_EX=fcntl.LOCK_EX,
                                                                LOCK_NB=fcntl.LOCK_NB))


def test_a_new_log_on_a_file_system_without_flock_is_taken_with_a_warning(tmp_path, fs_without_flock, caplog):
    with caplog.at_level(logging.WARNING, logger="gpuwise.monitor.new_log"):
        claim = create_new_log(tmp_path / "run.db")
    assert claim.path == tmp_path / "run.db" and claim.created and claim.fd is not None
    assert "does not lock files" in caplog.text and "being written" not in caplog.text
    claim.release()


def test_a_log_holding_a_run_is_still_refused_without_flock(tmp_path, fs_without_flock):
    (tmp_path / "run.db").write_bytes(b"SQLite format 3\x00")
    with pytest.raises(MonitorError, match="already exists"):
        create_new_log(tmp_path / "run.db")


def test_a_log_another_run_holds_is_still_refused(tmp_path):
    first = create_new_log(tmp_path / "run.db")
    with pytest.raises(MonitorError, match="being written by another run"):
        create_new_log(tmp_path / "run.db")
    first.release()
