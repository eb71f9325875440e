"""The run log: one SQLite file (WAL mode) per run, shared by monitor, guard, report and advise.

Why SQLite in WAL mode: every committed row survives a killed writer (crash-safe), readers (``gpuwise
report`` while a run goes on, pandas' ``read_sql``) never block the writer, and memory stays bounded
however long the run is because rows live on disk. A writer commits on a timer at most
``flush_interval_s`` (1 s) after its first uncommitted row, whether or not it writes again: a killed writer
loses at most the last second, and a second writer on the same file (``gpuwise run --log x.db`` around a
guarded job writing ``--run-log x.db``) waits at most that long for the lock. A process that ends through
Python (normal end, ``sys.exit``, an uncaught exception, Ctrl-C) commits what it wrote: every open ``RunLog``
is flushed at interpreter exit (``atexit``; held by weak reference, so that keeps no log alive). Only a
process killed outright (``kill -9``, ``os._exit``) can lose its last second.

Tables (documented in docs/runlog.md; columns may be added, never renamed):

- ``meta(key TEXT PRIMARY KEY, value TEXT)``: command, host, start time, gpuwise version, workload JSON.
- ``gpu_samples``: one row per GPU per sample (see ``GPU_SAMPLE_COLUMNS``); NULL where NVML lacks the field.
- ``train_metrics(t_s, step, name, value)``: loss, lr, batch_size, micro_batch_size, grad_norm, ...
  written by ``gpuwise.guard`` and read by ``gpuwise advise``.
- ``train_metrics_superseded(t_s, step, name, value, superseded_t_s)``: rows of ``train_metrics`` that a
  resumed run redid, moved there when it resumed (``RunLog.supersede_steps_after``), kept.
- ``events(t_s, kind, message)``: checkpoint saved, OOM recovered, GPU lost, preempted, ...

Times ``t_s`` are Unix seconds (float).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from gpuwise.errors import GpuwiseError

logger = logging.getLogger(__name__)
_warned_newer: set[str] = set()   # one warning per run log and process

SCHEMA_VERSION = 1

# How a guarded training ended (docs/runlog.md): gpuwise.guard.train_end writes it, gpuwise.advise.run_end reads it.
TRAIN_END_KEY = "train_end"                 # meta: the outcome, one of TRAIN_END_OUTCOMES
TRAIN_END_STEP_KEY = "train_end_step"       # meta: optimizer steps completed
TRAIN_END_T_S_KEY = "train_end_t_s"         # meta: when, Unix seconds
TRAIN_END_DETAIL_KEY = "train_end_detail"   # meta: one line (the exception, the preemption's exit code)
TRAIN_END_DETAIL_CHARS = 300                # the detail is clipped to this
TRAIN_END_EVENT = "train_end"               # event, one per attempt: "<outcome> at step N[: detail]"
TRAIN_END_OUTCOMES = ("finished", "preempted", "crashed", "interrupted", "stopped")

# Names one part writes and another reads (docs/runlog.md). The torch hook (gpuwise.monitor.hook.sitecustomize)
# imports only the standard library and keeps its own copy of TORCH_MEMORY_EVENT.
PREEMPTED_EVENT = "preempted"         # event: the guard's, before it checkpoints and exits with EXIT_RESTART (report)
TORCH_MEMORY_EVENT = "torch_memory"   # event: JSON peak allocated/reserved per device, the guard's or the torch hook's
GPU_LOST_EVENT = "gpu_lost"           # event: the monitor's, once per GPU that fell off the bus
WORKLOAD_KEY = "workload"             # meta: the Workload JSON (`gpuwise run --model`, the guard's workload=)
TORCH_VERSION_KEY = "torch_version"   # meta: the guard's torch version (report, calibrate)
CUDA_VERSION_KEY = "cuda_version"     # meta: the guard's torch's CUDA version, "" for a CPU build
STEP_TIME_METRIC = "step_time_s"      # train metric: the wall time of each optimizer step, the guard's

# The meta keys the monitor writes (gpuwise.monitor.log_meta: `gpuwise run`, `watch --log`, `exporter --log`), which
# report (and whoever reads a run log) reads.
# meta keys written when sampling starts (start_meta): where and how the samples were taken
HOST_KEY = "host"                          # socket.gethostname()
START_T_S_KEY = "start_t_s"                # Unix seconds
GPUWISE_VERSION_KEY = "gpuwise_version"
INTERVAL_S_KEY = "interval_s"              # seconds between samples: asked for, or kept (interval_meta)
BACKEND_KEY = "backend"                    # the backend's name ("nvml", "replay"); "none" without a driver
DRIVER_VERSION_KEY = "driver_version"
# meta keys written when sampling ends (end_meta)
END_T_S_KEY = "end_t_s"                    # Unix seconds; absent: killed, or still running
REQUESTED_INTERVAL_S_KEY = "requested_interval_s"   # only when the interval kept was slower than asked for
# meta keys only `gpuwise run` writes (monitor.runner)
COMMAND_KEY = "command"                    # the command, a JSON list
PID_KEY = "pid"                            # the command's pid
EXIT_CODE_KEY = "exit_code"                # as a shell gives it: 128 + N when signal N ended the command
SIGNAL_KEY = "signal"                      # the signal's name ("SIGKILL"), only when a signal ended the command
START_ERROR_KEY = "start_error"            # why the command could not start (exit code 127 or 126)
# the GPUs the command could see: CUDA_VISIBLE_DEVICES as it got it, JSON: a string ("0,1", "GPU-…,MIG-…") or null
# (unset: every GPU); absent in a log written before it was recorded (the report then counts no GPU idle beside a
# job whose processes NVML listed, since the others may be another job's)
VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"
VISIBLE_DEVICES_KEY = "cuda_visible_devices"
MONITOR_META_KEYS = (HOST_KEY, START_T_S_KEY, GPUWISE_VERSION_KEY, INTERVAL_S_KEY, BACKEND_KEY, DRIVER_VERSION_KEY,
                     END_T_S_KEY, REQUESTED_INTERVAL_S_KEY, COMMAND_KEY, PID_KEY, EXIT_CODE_KEY, SIGNAL_KEY,
                     START_ERROR_KEY, VISIBLE_DEVICES_KEY)

# (name, SQL type). Units in names; NULL = not supported / not reported.
GPU_SAMPLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("t_s", "REAL NOT NULL"),
    ("gpu_index", "INTEGER NOT NULL"),
    ("uuid", "TEXT"),
    ("name", "TEXT"),
    ("utilization_pct", "REAL"),          # share of the sample period in which any kernel ran
    ("memory_util_pct", "REAL"),
    ("memory_used_bytes", "INTEGER"),
    ("memory_total_bytes", "INTEGER"),
    ("process_memory_bytes", "INTEGER"),  # sum over the watched processes, where the driver tells
    ("power_w", "REAL"),
    ("temperature_c", "REAL"),
    ("sm_clock_mhz", "REAL"),
    ("mem_clock_mhz", "REAL"),
    ("pcie_tx_bytes_per_s", "REAL"),
    ("pcie_rx_bytes_per_s", "REAL"),
    ("sm_activity_pct", "REAL"),          # GPM (Hopper+): how busy the SMs really were
    ("sm_occupancy_pct", "REAL"),
    ("lost", "INTEGER NOT NULL DEFAULT 0"),  # 1: GPU fell off the bus at this sample
    ("mig_index", "INTEGER"),             # MIG instance of GPU gpu_index; NULL: the whole GPU
    ("process_count", "INTEGER"),         # compute processes NVML lists on this GPU
    ("process_match", "TEXT"),            # how process_memory_bytes was matched: 'pid', 'all' (pid namespaces differ)
    # Added later: a log written before them lacks them (the writer adds them, a reader reads them as NULL).
    ("gpu_instance_id", "INTEGER"),       # a MIG instance's GPU instance ID (nvidia-smi mig -lgi), not its slot
    ("memory_reserved_bytes", "INTEGER"), # the driver's reserved memory (NVML memory info v2; not in used, not free)
)
GPU_SAMPLE_NAMES: tuple[str, ...] = tuple(n for n, _ in GPU_SAMPLE_COLUMNS)


class RunLogError(GpuwiseError):
    pass


def _leave_wal(conn: sqlite3.Connection) -> None:
    """A finished log back in rollback-journal mode, so reading it (``open_for_reading``: report, advise,
    calibrate) writes no ``-wal``/``-shm`` beside it and works where the reader cannot write. Another connection
    still open (a guarded job inside ``gpuwise run``, a reader) keeps it in WAL: the last writer to close switches
    it, else the next reader once all are closed (``_finish_left_wal``)."""
    try:
        conn.execute("PRAGMA busy_timeout=100")
        conn.execute("PRAGMA journal_mode=DELETE")
    except sqlite3.OperationalError as exc:   # the other writer holds it: its close will do this
        logger.debug("run log left in WAL mode: %s", exc)


def _in_wal_mode(p: Path) -> bool:
    """The file's header says WAL mode (its bytes 18-19 are 2)."""
    try:
        with p.open("rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18:20] == b"\x02\x02"


def _is_finished_wal(p: Path) -> bool:
    """A file in WAL mode with no ``-wal`` beside it: no writer has it open (SQLite keeps the ``-wal`` while one
    does), so it can be read as it stands (a log an older gpuwise wrote)."""
    return _in_wal_mode(p) and not Path(f"{p}-wal").exists()


def _finish_left_wal(p: Path) -> None:
    """A log left in WAL mode with its ``-wal``/``-shm`` beside it, because another connection (a reader: pandas,
    a ``gpuwise report`` during the run) had it open when its last writer closed (``_leave_wal`` could not switch
    it then), is switched back to rollback-journal mode by the next reader, once no connection has it open: SQLite
    refuses the switch while one does (a live writer), and that refusal is the test. Nothing is tried where the
    reader cannot write the file or its directory."""
    if not _in_wal_mode(p) or _is_finished_wal(p) or not (os.access(p, os.W_OK) and os.access(p.parent, os.W_OK)):
        return
    try:
        conn = sqlite3.connect(str(p), timeout=0, isolation_level=None)
    except sqlite3.Error as exc:
        logger.debug("run log left in WAL mode: %s", exc)
        return
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
    except sqlite3.Error as exc:   # a writer (or another reader) has it open: the last one to close switches it
        logger.debug("run log left in WAL mode: %s", exc)
    finally:
        conn.close()


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class RunLog:
    """Append-only writer. Cheap to call per sample; commits in batches, each at most ``flush_interval_s``
    old (a timer commits when no further write comes). Safe to share between threads."""

    def __init__(self, path: str | Path, flush_interval_s: float = 1.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = _connect(self.path)
        self._flush_interval_s = flush_interval_s
        self._pending_since: float | None = None
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._closed = False
        self._pid = os.getpid()   # a forked child never commits its parent's transaction
        self._create()
        _OPEN_LOGS.add(self)  # committed at interpreter exit if never closed (weakly held)

    def _create(self) -> None:
        cols = ", ".join(f"{n} {t}" for n, t in GPU_SAMPLE_COLUMNS)
        self._conn.executescript(
            f"""
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE IF NOT EXISTS gpu_samples ({cols});
            CREATE INDEX IF NOT EXISTS gpu_samples_t ON gpu_samples (t_s);
            CREATE TABLE IF NOT EXISTS train_metrics (t_s REAL NOT NULL, step INTEGER NOT NULL,
                                                      name TEXT NOT NULL, value REAL);
            CREATE INDEX IF NOT EXISTS train_metrics_name ON train_metrics (name, step);
            CREATE TABLE IF NOT EXISTS train_metrics_superseded (t_s REAL NOT NULL, step INTEGER NOT NULL,
                                                                 name TEXT NOT NULL, value REAL,
                                                                 superseded_t_s REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS events (t_s REAL NOT NULL, kind TEXT NOT NULL, message TEXT);
            """
        )
        self._add_missing_columns()
        self._conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _add_missing_columns(self) -> None:
        """A log an older gpuwise wrote, before some of ``GPU_SAMPLE_COLUMNS`` existed, gets them (NULL in its
        earlier rows), so that this writer's rows keep every field. Another writer adding the same column at the
        same time is no error."""
        present = {row[1] for row in self._conn.execute("PRAGMA table_info(gpu_samples)")}
        for name, sql_type in GPU_SAMPLE_COLUMNS:
            if name in present:
                continue
            try:
                self._conn.execute(f"ALTER TABLE gpu_samples ADD COLUMN {name} {sql_type}")
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):
                    raise

    # -- writing ---------------------------------------------------------------------------------
    def set_meta(self, key: str, value: object) -> None:
        text = value if isinstance(value, str) else json.dumps(value)
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, text))

    def set_meta_first(self, key: str, value: object) -> str:
        """``value`` under ``key`` unless the log already holds one there (written by another writer of the same
        log: ``gpuwise run`` before the job's own guard); the text the log holds under ``key`` now. One statement,
        so two writers never both win."""
        text = value if isinstance(value, str) else json.dumps(value)
        with self._lock:
            self._conn.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (key, text))
            return self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]

    def write_gpu_samples(self, samples: Iterable[Mapping[str, object]]) -> None:
        names = GPU_SAMPLE_NAMES
        rows = [tuple(s.get(n, 0 if n == "lost" else None) for n in names) for s in samples]
        if rows:
            self._write(f"INSERT INTO gpu_samples ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", rows)

    def log_train(self, step: int, t_s: float | None = None, **metrics: float | None) -> None:
        """``log_train(120, loss=2.31, lr=3e-4, batch_size=64, micro_batch_size=32, grad_norm=1.2)``."""
        t = time.time() if t_s is None else t_s
        rows = [(t, int(step), name, None if v is None else float(v)) for name, v in metrics.items()]
        self._write("INSERT INTO train_metrics VALUES (?, ?, ?, ?)", rows)

    def supersede_steps_after(self, step: int) -> int:
        """Move the ``train_metrics`` rows of the steps after ``step`` to ``train_metrics_superseded`` (kept, with
        the time they were moved): a run resumed from the checkpoint of ``step`` redoes those steps, and
        ``train_metrics`` then holds each step once, as the resumed run logs it. One transaction: a reader sees
        the rows in one table or the other, never both or neither. Returns how many steps were moved."""
        with self._lock:
            self.flush()  # the move commits on its own
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                steps = self._conn.execute("SELECT COUNT(DISTINCT step) FROM train_metrics WHERE step > ?",
                                           (step,)).fetchone()[0]
                self._conn.execute("INSERT INTO train_metrics_superseded SELECT t_s, step, name, value, ? "
                                   "FROM train_metrics WHERE step > ?", (time.time(), step))
                self._conn.execute("DELETE FROM train_metrics WHERE step > ?", (step,))
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return steps

    def log_event(self, kind: str, message: str = "", t_s: float | None = None) -> None:
        self._write("INSERT INTO events VALUES (?, ?, ?)", [(time.time() if t_s is None else t_s, kind, message)])
        self.flush()  # events are rare and important: never lose one

    def _write(self, sql: str, rows: list[tuple]) -> None:
        with self._lock:
            if not self._conn.in_transaction:
                # IMMEDIATE: take the write lock now (waiting for another writer's commit, at most its
                # flush interval), never fail half-way through a batch on an upgrade.
                self._conn.execute("BEGIN IMMEDIATE")
            if self._pending_since is None:
                self._pending_since = time.monotonic()
                self._timer = threading.Timer(self._flush_interval_s, self._timed_flush)
                self._timer.daemon = True
                self._timer.start()
            self._conn.executemany(sql, rows)
            if time.monotonic() - self._pending_since >= self._flush_interval_s:
                self.flush()

    def _timed_flush(self) -> None:
        try:
            self.flush()
        except sqlite3.Error:
            pass  # the writer's next write or flush meets the same error and reports it

    def flush(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            # The connection's own flag, not _pending_since: an interrupt (Ctrl-C) between BEGIN and the
            # bookkeeping in _write leaves a transaction that must still be committed.
            try:
                if not self._closed and self._conn.in_transaction:
                    self._conn.execute("COMMIT")
            finally:
                # committed, or rolled back by SQLite on an I/O error
                if self._closed or not self._conn.in_transaction:
                    self._pending_since = None

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
                _leave_wal(self._conn)
            finally:
                self._closed = True
                self._conn.close()
                _OPEN_LOGS.discard(self)

    def __enter__(self) -> "RunLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Every RunLog not yet closed, weakly held: a writer whose process ends through Python without closing it
# (an uncaught exception, Ctrl-C, sys.exit, a script that never calls close) still commits its last rows. An
# open transaction is otherwise rolled back when the connection goes, losing up to ``flush_interval_s`` of
# rows: with a guarded job's few steps per second, that was the whole loss curve of a short run.
_OPEN_LOGS: "weakref.WeakSet[RunLog]" = weakref.WeakSet()


def _flush_open_logs() -> None:
    """At interpreter exit: commit what every open RunLog holds (the timer thread, a daemon, may never fire)."""
    for run_log in list(_OPEN_LOGS):
        if run_log._pid != os.getpid():
            continue  # inherited through fork: the connection (and its lock) are the parent's
        try:
            run_log.flush()
        except sqlite3.Error as exc:  # a full disk, a lost mount: say so, and flush the others
            logger.warning("%s: rows of the last %gs not committed at exit: %s", run_log.path,
                           run_log._flush_interval_s, exc)


atexit.register(_flush_open_logs)


# -- reading ---------------------------------------------------------------------------------------
def open_for_reading(path: str | Path) -> sqlite3.Connection:
    """A read-only connection; raises RunLogError (exit 2) when the file is not a gpuwise run log, or is one
    that is damaged (truncated, overwritten)."""
    p = Path(path)
    if not p.is_file():
        raise RunLogError(f"no such run log: {p}")
    _finish_left_wal(p)
    try:
        # ``immutable`` where no writer has the file open: a read-only WAL connection would otherwise create
        # the -wal/-shm files beside a log it only reads (and fail where it cannot write)
        how = "immutable=1" if _is_finished_wal(p) else "mode=ro"
        conn = sqlite3.connect(f"{p.resolve().as_uri()}?{how}", uri=True, timeout=10.0)
        version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise RunLogError(_unreadable(p, exc, "not a gpuwise run log")) from None
    _warn_if_newer(p, version[0] if version else None)
    conn.row_factory = sqlite3.Row
    return conn


def _warn_if_newer(path: Path, version: object) -> None:
    if version is None:
        return
    try:
        newer = int(str(version)) > SCHEMA_VERSION
    except ValueError:
        newer = True   # not a number: not a version this gpuwise wrote
    if newer and str(path) not in _warned_newer:
        _warned_newer.add(str(path))
        logger.warning("%s: run log schema version %s, newer than this gpuwise reads (%d): upgrade gpuwise; "
                       "what it shows may be incomplete", path, str(version)[:20], SCHEMA_VERSION)


def is_run_log(path: str | Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _unreadable(path: str | Path, exc: sqlite3.Error, otherwise: str) -> str:
    """The one line for a run log SQLite cannot read: a file that starts as an SQLite database but whose pages
    cannot be read is damaged (truncated, partly overwritten); anything else is ``otherwise``."""
    text = str(exc)[:100]
    damaged = isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError) or \
        "malformed" in text
    if damaged and is_run_log(path):
        return (f"{path}: damaged run log: SQLite cannot read it ({text}); a copy cut short or partly "
                "overwritten? the run's own file may be whole")
    return f"{path}: {otherwise} ({text})"


# Tables a run log may lack: a log written before they existed, or by a writer that never made them
# (docs/runlog.md: older logs can be read). Reading one that is missing gives no rows.
OPTIONAL_TABLES = ("gpu_samples", "train_metrics", "events")


def _rows(path: str | Path, sql: str, table: str | None = None, params: tuple = ()) -> list[sqlite3.Row]:
    """All rows of ``sql`` (with ``params``); RunLogError (exit 2) when the file's content cannot be read (text
    that is not UTF-8, a damaged page). ``table``: the table ``sql`` reads, when the log may lack it
    (OPTIONAL_TABLES): no rows then, not an error."""
    conn = open_for_reading(path)
    try:
        if table is not None and not conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone():
            return []
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise RunLogError(_unreadable(path, exc, "unreadable run log")) from None
    finally:
        conn.close()


def read_meta(path: str | Path) -> dict[str, str]:
    return {r["key"]: r["value"] for r in _rows(path, "SELECT key, value FROM meta")}


def visible_devices_meta(value: str | None) -> str:
    """``VISIBLE_DEVICES_KEY``'s text for a command given CUDA_VISIBLE_DEVICES ``value`` (None: unset)."""
    return json.dumps(value)


def read_visible_devices(meta: Mapping[str, str | None]) -> tuple[bool, str | None]:
    """(whether ``meta`` records the GPUs the command could see, its CUDA_VISIBLE_DEVICES: None when unset, every GPU
    visible). A text that is neither a JSON string nor null (written by hand: ``0,1``) is the variable itself."""
    if VISIBLE_DEVICES_KEY not in meta:
        return False, None
    text = meta[VISIBLE_DEVICES_KEY]
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return True, text
    return True, value if value is None or isinstance(value, str) else text


# The order rows are read in, and numbered in (a reader's "gpu_samples row N"): by time, then GPU, then as written.
SAMPLE_ORDER = "t_s, gpu_index, rowid"


# A log may still be written while it is read (docs/runlog.md): a reader that checks the rows and then reads them,
# two connections, gives both the rowid of the last row written when it began (``last_gpu_sample_rowid``), so
# that both see the same rows. The writer only appends to ``gpu_samples``: a later row has a greater rowid.
EVERY_ROW = 2**63 - 1   # ``up_to_rowid`` None: no bound (SQLite's largest rowid)


def last_gpu_sample_rowid(path: str | Path) -> int:
    """The rowid of the last ``gpu_samples`` row written (0: none yet): the ``up_to_rowid`` that makes the readers
    below read the same rows however many a live writer appends meanwhile."""
    rows = _rows(path, "SELECT COALESCE(MAX(rowid), 0) AS last FROM gpu_samples", "gpu_samples")
    return rows[0]["last"] if rows else 0


def _bound(up_to_rowid: int | None) -> int:
    return EVERY_ROW if up_to_rowid is None else up_to_rowid


def _sample_columns(conn: sqlite3.Connection) -> str:
    """The select list of ``gpu_samples`` giving every column of ``GPU_SAMPLE_COLUMNS``: NULL where a log written
    before it existed lacks it; columns this gpuwise does not know, from a newer one, kept."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(gpu_samples)")}
    return "*" + "".join(f", NULL AS {n}" for n in GPU_SAMPLE_NAMES if n not in present)


def _sample_dicts(path: str | Path, sql: str, params: tuple = ()) -> list[dict]:
    """The rows of ``sql`` over ``gpu_samples`` (``{columns}`` in it: ``_sample_columns``) as dicts; none where
    the log has no ``gpu_samples``; RunLogError as ``_rows``."""
    conn = open_for_reading(path)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='gpu_samples'").fetchone():
            return []
        conn.row_factory = None
        cursor = conn.execute(sql.format(columns=_sample_columns(conn)), params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]
    except sqlite3.Error as exc:
        raise RunLogError(_unreadable(path, exc, "unreadable run log")) from None
    finally:
        conn.close()


def read_gpu_samples(path: str | Path, *, up_to_rowid: int | None = None) -> list[dict]:
    """Every row (``SAMPLE_ORDER``; ``up_to_rowid``: those written up to it), with every column of
    ``GPU_SAMPLE_COLUMNS``: one a log written before it existed lacks is None (columns this gpuwise does not
    know, from a newer one, are kept as they are)."""
    return _sample_dicts(path, f"SELECT {{columns}} FROM gpu_samples WHERE rowid <= ? ORDER BY {SAMPLE_ORDER}",
                         (_bound(up_to_rowid),))


ROWS_PER_CHUNK = 16_384   # iter_gpu_sample_rows: a few MB of Python objects at a time, however long the log


def iter_gpu_sample_rows(path: str | Path, names: Sequence[str], *, up_to_rowid: int | None = None,
                         rows_per_chunk: int = ROWS_PER_CHUNK) -> Iterator[list[tuple]]:
    """The ``gpu_samples`` rows written up to ``up_to_rowid`` (all: None), in the order written (rowid), as tuples
    of the columns ``names`` (of ``GPU_SAMPLE_NAMES``; NULL where a log written before one existed lacks it), in
    lists of at most ``rows_per_chunk``: a long log is read without holding every row at once. No rows where the
    log has no ``gpu_samples``; RunLogError as ``_rows``."""
    unknown = [n for n in names if n not in GPU_SAMPLE_NAMES]
    if unknown:
        raise ValueError(f"not gpu_samples columns: {', '.join(unknown)}")
    conn = open_for_reading(path)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='gpu_samples'").fetchone():
            return
        conn.row_factory = None
        present = {row[1] for row in conn.execute("PRAGMA table_info(gpu_samples)")}
        select = ", ".join(n if n in present else f"NULL AS {n}" for n in names)
        cursor = conn.execute(f"SELECT {select} FROM gpu_samples WHERE rowid <= ? ORDER BY rowid",
                              (_bound(up_to_rowid),))
        while rows := cursor.fetchmany(rows_per_chunk):
            yield rows
    except sqlite3.Error as exc:
        raise RunLogError(_unreadable(path, exc, "unreadable run log")) from None
    finally:
        conn.close()


def read_gpu_usage(path: str | Path, *, up_to_rowid: int | None = None) -> list[dict]:
    """The GPUs of the log in one grouped pass, not a dict per row: one group per ``held_memory`` (whether
    ``process_memory_bytes`` is set and not 0), ``gpu_index`` and ``name``, with ``peak_bytes`` (the largest
    ``process_memory_bytes`` of a group that held memory, else of ``memory_used_bytes``; zeros left out, None
    where none) and ``first_t_s``; in the order of each group's first row (``SAMPLE_ORDER``)."""
    held = "COALESCE(process_memory_bytes, 0) != 0"
    return _sample_dicts(path, f"""
        SELECT {held} AS held_memory, gpu_index, name, MIN(t_s) AS first_t_s,
               MAX(CASE WHEN {held} THEN process_memory_bytes ELSE NULLIF(memory_used_bytes, 0) END) AS peak_bytes
        FROM (SELECT rowid AS row_id, {{columns}} FROM gpu_samples WHERE rowid <= ?)
        GROUP BY held_memory, gpu_index, name ORDER BY first_t_s, gpu_index, MIN(row_id)""", (_bound(up_to_rowid),))


def read_gpu_sample_times(path: str | Path, *, up_to_rowid: int | None = None) -> list[float]:
    """The distinct sample times ``t_s`` of the log, in order: one per frame the monitor sampled."""
    return [r["t_s"] for r in _rows(path, "SELECT DISTINCT t_s FROM gpu_samples WHERE rowid <= ? ORDER BY t_s",
                                    "gpu_samples", (_bound(up_to_rowid),))]


def read_gpu_samples_at(path: str | Path, t_s: float, *, up_to_rowid: int | None = None) -> list[dict]:
    """The rows sampled at ``t_s`` (one frame), as ``read_gpu_samples`` gives them."""
    return _sample_dicts(path, f"SELECT {{columns}} FROM gpu_samples WHERE t_s = ? AND rowid <= ? ORDER BY {SAMPLE_ORDER}",
                         (t_s, _bound(up_to_rowid)))


def read_gpu_samples_where(path: str | Path, condition_sql: str, *, up_to_rowid: int | None = None) -> list[dict]:
    """The rows meeting ``condition_sql`` (over the columns of ``GPU_SAMPLE_COLUMNS``) as ``read_gpu_samples``
    gives them, each with its place: ``_row_no`` (1-based, in ``SAMPLE_ORDER``), ``_frame_no`` (1-based among
    the distinct times) and ``_frame_row_no`` (1-based within its time), among the rows up to ``up_to_rowid``.
    SQLite scans the log once; the places are worked out only when some row meets the condition."""
    bound = (_bound(up_to_rowid),)
    if not _sample_dicts(path, f"SELECT 1 AS hit FROM (SELECT {{columns}} FROM gpu_samples WHERE rowid <= ?) "
                               f"WHERE {condition_sql} LIMIT 1", bound):
        return []
    return _sample_dicts(path, f"""
        SELECT * FROM (SELECT {{columns}}, row_number() OVER (ORDER BY {SAMPLE_ORDER}) AS _row_no,
                              dense_rank() OVER (ORDER BY t_s) AS _frame_no,
                              row_number() OVER (PARTITION BY t_s ORDER BY gpu_index, rowid) AS _frame_row_no
                       FROM gpu_samples WHERE rowid <= ?)
        WHERE {condition_sql} ORDER BY _row_no""", bound)


def read_train_metrics(path: str | Path) -> dict[str, list[tuple[int, float, float | None]]]:
    """name -> [(step, t_s, value)] ordered by step."""
    out: dict[str, list[tuple[int, float, float | None]]] = {}
    for r in _rows(path, "SELECT step, t_s, name, value FROM train_metrics ORDER BY name, step, t_s", "train_metrics"):
        out.setdefault(r["name"], []).append((r["step"], r["t_s"], r["value"]))
    return out


def read_events(path: str | Path) -> list[dict]:
    return [dict(r) for r in _rows(path, "SELECT * FROM events ORDER BY t_s", "events")]
