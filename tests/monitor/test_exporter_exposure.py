"""The exporter under idle clients and on open addresses: a connection that sends nothing is dropped after
the read timeout (it held a thread and a file descriptor for ever), idle clients do not delay a scrape, and
binding beyond loopback warns that the host name and GPU UUIDs are exposed. Real sockets."""

from __future__ import annotations

import logging
import socket
import time
import urllib.request

import pytest

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.monitor.backend import MonitorError
from gpuwise.monitor.exporter import is_loopback, serve

from monitor_fakes import two_gpu_frames


def _sampler() -> Sampler:
    sampler = Sampler(ReplayBackend(two_gpu_frames(4)))
    sampler.sample_once()
    return sampler


def test_idle_clients_are_dropped_after_the_read_timeout_and_do_not_block_a_scrape():
    server, _ = serve(_sampler(), port=0, bind="127.0.0.1", read_timeout_s=0.5)
    port = server.server_address[1]
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(8)]
    try:
        start = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as resp:
            assert b"DCGM_FI_DEV_GPU_UTIL" in resp.read()
        assert time.monotonic() - start < 2
        for s in idle:   # the server closes each idle connection: the client reads end of file
            assert s.recv(1) == b""
        assert time.monotonic() - start < 5
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        server.server_close()


def test_a_slow_request_line_is_dropped_too():
    server, _ = serve(_sampler(), port=0, bind="127.0.0.1", read_timeout_s=0.5)
    try:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10) as s:
            s.sendall(b"GET /metrics HT")   # half a request line, then nothing
            assert s.recv(1) == b""
    finally:
        server.shutdown()
        server.server_close()


def test_binding_beyond_loopback_warns_that_host_and_uuids_are_exposed(caplog):
    with caplog.at_level(logging.WARNING, logger="gpuwise.monitor.exporter"):
        server, _ = serve(_sampler(), port=0, bind="0.0.0.0")
        server.shutdown()
        server.server_close()
    assert any("UUID" in r.getMessage() and "host name" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gpuwise.monitor.exporter"):
        server, _ = serve(_sampler(), port=0, bind="127.0.0.1")
        server.shutdown()
        server.server_close()
    assert not caplog.records


@pytest.mark.parametrize("bind, loopback", [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                            ("0.0.0.0", False), ("::", False)])
def test_loopback_addresses(bind, loopback):
    assert is_loopback(bind) is loopback


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), float("inf")])
def test_a_bad_read_timeout_is_refused(timeout_s):
    with pytest.raises(MonitorError, match="read timeout"):
        serve(_sampler(), port=0, read_timeout_s=timeout_s)
