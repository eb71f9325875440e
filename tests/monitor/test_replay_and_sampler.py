"""The replay backend, the sampler thread, and the run log it writes (incl. a writer killed with -9)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pandas as pd

from gpuwise.monitor import ReplayBackend, Sampler
from gpuwise.runlog import RunLog, read_events, read_gpu_samples

from monitor_fakes import GIB, two_gpu_frames, write_frames


def test_replay_reports_missing_fields_as_none_and_keeps_a_lost_gpu_lost(tmp_path):
    backend = ReplayBackend.from_file(write_frames(tmp_path / "f.json", two_gpu_frames(3)))
    assert backend.driver_version() == "550.54.15"
    frames = [backend.sample() for _ in range(5)]
    assert frames[0][1].utilization_pct is None and frames[0][1].lost == 0
    assert [f[1].lost for f in frames] == [0, 0, 1, 1, 1]  # the last frame repeats
    assert all(f[0].utilization_pct is not None for f in frames)


def test_replay_attributes_process_memory_like_nvml(tmp_path):
    me = os.getpid()
    frames = [[{"gpu_index": 0, "memory_used_bytes": 9 * GIB,
                "processes": [{"pid": me, "used_memory_bytes": 4 * GIB}, {"pid": 1, "used_memory_bytes": 5 * GIB}]}]]
    (s,) = ReplayBackend(frames).sample(watch_pids={me})
    assert (s.process_memory_bytes, s.process_match, s.process_count) == (4 * GIB, "pid", 2)


def test_sampler_writes_every_device_to_the_run_log_and_logs_the_loss_once(tmp_path):
    log = tmp_path / "run.db"
    with RunLog(log) as runlog:
        sampler = Sampler(ReplayBackend(two_gpu_frames(4)), interval_s=0.1, runlog=runlog)
        for _ in range(5):
            sampler.sample_once()
        sampler.stop(final_sample=False)
    rows = read_gpu_samples(log)
    assert len(rows) == 10
    assert [r["lost"] for r in rows if r["gpu_index"] == 1] == [0, 0, 1, 1, 1]
    assert [e["kind"] for e in read_events(log)].count("gpu_lost") == 1


def test_the_live_history_stays_bounded_however_long_the_run():
    sampler = Sampler(ReplayBackend(two_gpu_frames(2), loop=True), history=7)
    for _ in range(50):
        sampler.sample_once()
    hist = sampler.history()
    assert set(hist) == {(0, None), (1, None)} and all(len(v) == 7 for v in hist.values())


def test_sampler_thread_samples_until_stopped(tmp_path):
    with RunLog(tmp_path / "run.db") as runlog:
        sampler = Sampler(ReplayBackend(two_gpu_frames(2), loop=True), interval_s=0.1, runlog=runlog).start()
        deadline = time.monotonic() + 120
        while sampler.samples_taken < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        sampler.stop()
        taken = sampler.samples_taken
    assert taken >= 4  # three from the thread, one final sample
    assert len(read_gpu_samples(tmp_path / "run.db")) == 2 * taken


WRITER = textwrap.dedent("""
    import sys
    from gpuwise.monitor import ReplayBackend, Sampler
    from gpuwise.runlog import RunLog
    sys.path.insert(0, sys.argv[2])
    from monitor_fakes import two_gpu_frames
    sampler = Sampler(ReplayBackend(two_gpu_frames(3), loop=True), interval_s=0.1, runlog=RunLog(sys.argv[1]))
    while True:
        s = sampler.sample_once()
        print(repr(s[0].t_s), flush=True)
        sampler._stop.wait(0.1)
""")


def test_a_writer_killed_with_sigkill_keeps_every_row_older_than_about_a_second(tmp_path):
    log = tmp_path / "run.db"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), os.path.dirname(__file__)],
                              stdout=subprocess.PIPE, text=True)
    written: list[float] = []
    try:
        start = time.monotonic()
        while time.monotonic() - start < 3.0 or len(written) < 15:
            line = writer.stdout.readline()
            assert line, "the writer died"
            written.append(float(line))
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    # A fresh reader recovers the WAL; pandas reads the log as any SQLite file.
    with sqlite3.connect(log) as conn:
        df = pd.read_sql("SELECT * FROM gpu_samples", conn)
    last = written[-1]
    older = [t for t in written if t <= last - 1.5]
    assert older, "too few samples to judge"
    survived = set(df.loc[df.gpu_index == 0, "t_s"])
    assert set(older) <= survived
    assert len(df) % 2 == 0  # each sample's rows commit together
