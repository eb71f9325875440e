"""Two processes writing one run log (``gpuwise run --log x.db`` around a guarded job writing
``--run-log x.db``): neither waits long for the other, and a SIGKILL loses at most the last second."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

from gpuwise.runlog import read_gpu_samples, read_train_metrics

# Logs a few steps, then one slow "training step" with nothing more to write: its rows must still commit.
GUARDED_JOB = textwrap.dedent("""
    import sys, time
    from gpuwise.runlog import RunLog
    log = RunLog(sys.argv[1])
    for step in range(1, 11):
        log.log_train(step, loss=1.0 / step)
        time.sleep(0.1)
    print("slow step", flush=True)
    time.sleep(60)
""")

# Samples GPUs every 50 ms for 2.5 s, timing each write.
MONITOR = textwrap.dedent("""
    import json, sqlite3, sys, time
    from gpuwise.runlog import RunLog
    log = RunLog(sys.argv[1])
    worst_s, errors, rows = 0.0, [], 0
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        t0 = time.monotonic()
        try:
            log.write_gpu_samples([{"t_s": time.time(), "gpu_index": 0, "utilization_pct": 50.0}])
            rows += 1
        except sqlite3.OperationalError as exc:
            errors.append(str(exc))
        worst_s = max(worst_s, time.monotonic() - t0)
        time.sleep(0.05)
    log.close()
    print(json.dumps({"worst_s": worst_s, "errors": errors, "rows": rows}))
""")


def test_a_second_writer_never_waits_long_and_a_killed_writer_loses_at_most_a_second(tmp_path):
    db = tmp_path / "run.db"
    job = subprocess.Popen([sys.executable, "-c", GUARDED_JOB, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout.readline().strip() == "slow step"
        monitor = subprocess.run([sys.executable, "-c", MONITOR, str(db)], capture_output=True, text=True, timeout=60)
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    result = json.loads(monitor.stdout)
    assert result["errors"] == [] and result["worst_s"] < 1.5, result
    steps = [s for s, _, _ in read_train_metrics(db)["loss"]]
    assert steps == list(range(1, 11)), "rows written more than a second before the kill were lost"
    assert len(read_gpu_samples(db)) == result["rows"]
