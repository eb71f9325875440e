"""Prometheus metrics of the latest samples, named like NVIDIA dcgm-exporter's where they mean the same, so
existing Grafana dashboards work. Units follow DCGM: FB in MiB, PROF ratios in 0..1. A field the GPU does
not report is left out (no sample), as DCGM does; a lost GPU exports only ``gpuwise_gpu_lost 1``.

Metrics are served on ``/metrics`` (as dcgm-exporter serves them); ``/`` answers with a line pointing
there, any other path is 404 Not Found.

Each request's head (request line and headers) must arrive within ``read_timeout_s`` (10 s by default) in
all, not per read: a client that connects and sends nothing, or a byte now and then, is dropped then, so
idle and slow clients cannot hold every thread and file descriptor. After the head, each read and write has
that timeout.

Labels follow dcgm-exporter's: ``gpu`` (the GPU's index), ``UUID`` and ``modelName`` (the GPU's, also for
its MIG instances), ``device`` (``nvidia0``), ``Hostname``, and for a MIG instance ``GPU_I_PROFILE``
(``1g.10gb``) and ``GPU_I_ID`` (the GPU instance ID, as ``nvidia-smi mig -lgi`` lists it); empty for a whole
GPU (Prometheus reads an empty label as no label, as dcgm-exporter leaves them out). Not exported:
``pci_bus_id``, ``DCGM_FI_DRIVER_VERSION`` and the Kubernetes ``pod``/``namespace``/``container`` labels. Listening on
an address other than loopback is said (a warning): every scraper on that network sees the host name,
the GPU models and their UUIDs. There is no authentication and no TLS: put a proxy in front for that."""

from __future__ import annotations

import io
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from socketserver import ThreadingMixIn

from prometheus_client import make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from gpuwise.monitor.backend import MonitorError
from gpuwise.monitor.sample import GpuSample, mig_profile
from gpuwise.monitor.sampler import Sampler

logger = logging.getLogger(__name__)

MIB = 2**20
DEFAULT_READ_TIMEOUT_S = 10.0
LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "GPU_I_PROFILE", "GPU_I_ID")


def _scaled(attr: str, factor: float) -> Callable[[GpuSample], float | None]:
    def get(s: GpuSample) -> float | None:
        v = getattr(s, attr)
        return None if v is None else v * factor
    return get


def _ratio(attr: str) -> Callable[[GpuSample], float | None]:
    """A percentage as DCGM's ratio 0..1: divided by 100, so 70 % is 0.7 (times 0.01 gives 0.7000000000000001)."""
    def get(s: GpuSample) -> float | None:
        v = getattr(s, attr)
        return None if v is None else v / 100
    return get


def _whole_gpu(get: Callable[[GpuSample], float | None]) -> Callable[[GpuSample], float | None]:
    """``get`` for a whole GPU, None (no series) for a MIG instance."""
    return lambda s: None if s.mig_index is not None else get(s)


def _mig_instance(get: Callable[[GpuSample], float | None]) -> Callable[[GpuSample], float | None]:
    """``get`` for a MIG instance, None (no series) for a whole GPU."""
    return lambda s: get(s) if s.mig_index is not None else None


def _whole_mib(bytes_of: Callable[[GpuSample], int | None]) -> Callable[[GpuSample], float | None]:
    """Whole MiB (rounded down), as dcgm-exporter exports the framebuffer: no fractions of a MiB."""
    def get(s: GpuSample) -> float | None:
        v = bytes_of(s)
        return None if v is None else float(int(v) // MIB)
    return get


METRICS: tuple[tuple[str, str, Callable[[GpuSample], float | None]], ...] = (
    # A MIG instance's busy share is GPM's GRAPHICS_UTIL (NVML has no utilization per instance): dcgm-exporter's
    # per-instance GR_ENGINE_ACTIVE, a ratio; GPU_UTIL stays the whole GPUs', as in dcgm-exporter.
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %): share of time any kernel ran.",
     _whole_gpu(_scaled("utilization_pct", 1))),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active (MIG instances, GPM).",
     _mig_instance(_ratio("utilization_pct"))),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", _scaled("memory_util_pct", 1)),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", _whole_mib(lambda s: s.memory_used_bytes)),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", _whole_mib(lambda s: s.memory_free_bytes)),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", _scaled("power_w", 1)),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", _scaled("temperature_c", 1)),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", _scaled("sm_clock_mhz", 1)),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", _scaled("mem_clock_mhz", 1)),
    ("DCGM_FI_PROF_SM_ACTIVE", "Ratio of cycles an SM has at least 1 warp assigned (GPM).", _ratio("sm_activity_pct")),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "Ratio of resident warps to the maximum (GPM).", _ratio("sm_occupancy_pct")),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "PCIe bytes transmitted per second.", _scaled("pcie_tx_bytes_per_s", 1)),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "PCIe bytes received per second.", _scaled("pcie_rx_bytes_per_s", 1)),
    ("gpuwise_process_memory_bytes", "GPU memory of the watched processes (bytes).", _scaled("process_memory_bytes", 1)),
)


class SamplerCollector(Collector):
    """Reads the sampler's latest samples at scrape time (scrapes never call NVML themselves)."""

    def __init__(self, sampler: Sampler, hostname: str | None = None) -> None:
        self.sampler = sampler
        self.hostname = hostname or socket.gethostname()

    def collect(self) -> Iterator[Any]:
        samples = self.sampler.latest()
        gpus = {s.gpu_index: s for s in samples if s.mig_index is None}
        families = {name: GaugeMetricFamily(name, doc, labels=LABELS) for name, doc, _ in METRICS}
        lost = GaugeMetricFamily("gpuwise_gpu_lost", "1 when the GPU fell off the bus (NVML GPU_IS_LOST).", labels=LABELS)
        for s in samples:
            labels = series_labels(s, gpus.get(s.gpu_index), self.hostname)
            lost.add_metric(labels, float(s.lost))
            if s.lost:
                continue
            for name, _, get in METRICS:
                value = get(s)
                if value is not None:
                    families[name].add_metric(labels, float(value))
        yield from families.values()
        yield lost


def series_labels(s: GpuSample, gpu: GpuSample | None, hostname: str) -> list[str]:
    """The values of ``LABELS`` for ``s``, as dcgm-exporter labels it: a MIG instance carries the UUID and model
    of its GPU (``gpu``, the whole-GPU sample of the same index, when there is one), its profile and its GPU
    instance ID."""
    mig = s.mig_index is not None
    owner = gpu if mig and gpu is not None else s
    instance_id = s.gpu_instance_id if s.gpu_instance_id is not None else s.mig_index
    return [str(s.gpu_index), owner.uuid or "", f"nvidia{s.gpu_index}", owner.name or "", hostname,
            mig_profile(s.name) if mig else "", str(instance_id) if mig else ""]


class _HeadDeadline(io.RawIOBase):
    """The connection's reads, each given only what is left of the request head's deadline (a socket timeout
    alone restarts at every byte). ``deadline_s`` None (the head is in): each read has ``timeout_s``."""

    def __init__(self, sock: socket.socket, deadline_s: float, timeout_s: float) -> None:
        self.sock, self.deadline_s, self.timeout_s = sock, deadline_s, timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline_s is None:
            self.sock.settimeout(self.timeout_s)
        else:
            left_s = self.deadline_s - time.monotonic()
            if left_s <= 0:
                raise TimeoutError("the request head did not arrive in time")
            self.sock.settimeout(left_s)
        return self.sock.recv_into(buffer)


class _Handler(WSGIRequestHandler):
    """No request log; the request head's deadline (``timeout``) is set per server class (see serve)."""

    def setup(self) -> None:
        super().setup()
        self.rfile.close()       # the socket's own reader: replaced by one that keeps the deadline
        self._head = _HeadDeadline(self.connection, time.monotonic() + self.timeout, self.timeout)
        self.rfile = io.BufferedReader(self._head)

    def parse_request(self) -> bool:
        ok = super().parse_request()      # the request line and the headers are in
        self._head.deadline_s = None
        self.connection.settimeout(self.timeout)
        return ok

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:   # the deadline (TimeoutError), a client gone: drop the connection quietly
            self.close_connection = True


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("metrics request from %s failed", client_address, exc_info=True)


def is_loopback(bind: str) -> bool:
    """True when every address ``bind`` names is a loopback one (127.0.0.0/8, ::1, "localhost")."""
    try:
        infos = socket.getaddrinfo(bind, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        return bool(infos) and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback for i in infos)
    except (OSError, ValueError, UnicodeError):
        return False


def metrics_url(bind: str, port: int) -> str:
    """Where the metrics are served: ``http://BIND:PORT/metrics``, an IPv6 address in brackets (RFC 3986)."""
    host = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
    return f"http://{host}:{port}{METRICS_PATH}"


def check_serve_options(port: object, read_timeout_s: object, bind: object = "127.0.0.1") -> None:
    """MonitorError (exit 2, one line) when the port is not 0-65535, the read timeout not a number of
    seconds > 0 or the address empty: checked before anything starts (the sampler, its run log)."""
    if not isinstance(bind, str) or not bind.strip():
        raise MonitorError(f"--bind must be an address to listen on (127.0.0.1, 0.0.0.0 for every interface, ::1), "
                           f"got {bind!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise MonitorError(f"--port must be a whole number from 0 to 65535, got {port!r}")
    if not (isinstance(read_timeout_s, (int, float)) and 0 < read_timeout_s < float("inf")):
        raise MonitorError(f"--read-timeout: the read timeout must be a number of seconds > 0, got {read_timeout_s!r}")


METRICS_PATH = "/metrics"
_POINTER = b"gpuwise exporter: Prometheus metrics are at /metrics\n"


def metrics_app(registry: CollectorRegistry) -> Callable:
    """The WSGI app: the metrics on /metrics, a pointer to them on /, 404 Not Found elsewhere."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict, start_response: Callable) -> Any:
        path = environ.get("PATH_INFO") or "/"
        if path == METRICS_PATH:
            return metrics(environ, start_response)
        if path == "/":
            body, status = _POINTER, "200 OK"
        else:
            body, status = b"404 Not Found: the metrics are at /metrics\n", "404 Not Found"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    return _answer_head_as_get(app)


def _answer_head_as_get(app: Callable) -> Callable:
    """The WSGI ``app`` answering HEAD as GET without the body (Go's promhttp and net/http do so;
    prometheus-client answers 405): the status and headers of the GET, Content-Length its body's."""

    def wrapped(environ: dict, start_response: Callable) -> Any:
        if environ.get("REQUEST_METHOD") != "HEAD":
            return app(environ, start_response)
        said: list = []
        body = b"".join(app({**environ, "REQUEST_METHOD": "GET"}, lambda status, headers, *_: said.append((status, headers))))
        status, headers = said[0]
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"] + [("Content-Length", str(len(body)))]
        start_response(status, headers)
        return [b""]

    return wrapped


def serve(sampler: Sampler, port: int = 9400, bind: str = "127.0.0.1",
          read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> tuple[Any, Any]:
    """Starts the HTTP endpoint in a daemon thread; returns (server, thread). Port 0 picks a free port.
    MonitorError (exit 2, one line) when the port is out of range, taken, or the address cannot be bound."""
    check_serve_options(port, read_timeout_s, bind)
    registry = CollectorRegistry()
    registry.register(SamplerCollector(sampler))
    handler = type("Handler", (_Handler,), {"timeout": float(read_timeout_s)})
    try:
        infos = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]
        server_class = type("Server", (_Server,), {"address_family": family})
        server = make_server(sockaddr[0], port, metrics_app(registry), server_class, handler_class=handler)
    except (OSError, OverflowError, ValueError, UnicodeError) as exc:  # in use, no such address, bad name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise MonitorError(f"cannot serve metrics on {bind}:{port}: {reason}") from None
    if not is_loopback(bind):
        logger.warning("listening on %s, not loopback: anyone who can reach it reads the host name, the GPU "
                       "models and their UUIDs (no authentication, no TLS)", bind)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread
