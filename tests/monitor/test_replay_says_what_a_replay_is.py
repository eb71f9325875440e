"""A replay (GPUWISE_MONITOR_BACKEND=replay:PATH) of a file that is not JSON said only the JSON parser's words
("Expecting value: line 1 column 1 (char 0)"): not what a replay is, nor, for an nvidia-smi CSV (which `gpuwise
report` reads), where such a log goes. Now one line says both, exit code 2."""

from __future__ import annotations

import os

import pytest

from monitor_fakes import gpuwise

from gpuwise.monitor import MonitorError, ReplayBackend

SMI_CSV = ("timestamp, index, name, utilization.gpu [%], memory.used [MiB]\n"
           "2026/12/01 10:00:00.000, 0, NVIDIA A100-SXM4-80GB, 50 %, 1000 MiB\n")
REPLAY_IS = "a replay is a JSON file of frames or a gpuwise run log"


def test_watch_on_an_nvidia_smi_csv_says_what_a_replay_is_and_that_report_reads_the_csv(tmp_path):
    csv = tmp_path / "smi.csv"
    csv.write_text(SMI_CSV)
    r = gpuwise("watch", "--json", env=dict(os.environ, GPUWISE_MONITOR_BACKEND=f"replay:{csv}"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"gpuwise: error: cannot read replay frames from {csv}: {REPLAY_IS}, and this is "
                        f"comma-separated text (an nvidia-smi CSV? `gpuwise report {csv}` reads those; they are not "
                        "replayed)\n")


@pytest.mark.parametrize("text, error", [
    ("hello\n", "Expecting value: line 1 column 1 (char 0)"),
    ('{"frames": [[{"gpu_index": 0},]]}', "Expecting value: line 1 column 31 (char 30)"),   # JSON, badly written
])
def test_a_file_that_is_not_json_says_what_a_replay_is(tmp_path, text, error):
    frames = tmp_path / "frames.json"
    frames.write_text(text)
    with pytest.raises(MonitorError) as refused:
        ReplayBackend.from_file(frames)
    assert str(refused.value) == f"cannot read replay frames from {frames}: {REPLAY_IS}, and this is not JSON ({error})"
