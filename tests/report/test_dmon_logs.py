"""Reading `nvidia-smi dmon` output: plain, with -o DT, with -s um (frame buffer), repeated headers."""

from __future__ import annotations

import pytest

from gpuwise.report.errors import ReportError
from gpuwise.report.sources import load_usage_log

PLAIN = """\
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk
# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz
    0     98     45      -     35     12      0      0      -      -   1215   1410
    1     55     38      -      0      0      0      0      -      -   1215    210
    0    120     46      -     52     20      0      0      -      -   1215   1410
    1     55     38      -      0      0      0      0      -      -   1215    210
# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk
# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz
    0    110     46      -     40     15      0      0      -      -   1215   1410
    1     55     38      -      0      0      0      0      -      -   1215    210
"""

DATED_FB = """\
#Date       Time        gpu     sm    mem    enc    dec     fb   bar1
#YYYYMMDD   HH:MM:SS    Idx      %      %      %      %     MB     MB
 20261102   10:00:00      0     30     10      0      0  12288      5
 20261102   10:00:05      0     33     11      0      0  12300      5
"""


def write(tmp_path, text):
    p = tmp_path / "dmon.txt"
    p.write_text(text)
    return p


def test_plain_dmon_with_repeated_headers(tmp_path):
    log = load_usage_log(write(tmp_path, PLAIN))
    assert log.source == "nvidia-smi dmon" and len(log.samples) == 6
    s = log.samples[0]
    assert (s.gpu_index, s.power_w, s.utilization_pct, s.sm_clock_mhz) == (0, 98.0, 35.0, 1410.0)
    assert s.name is None and s.memory_total_bytes is None  # dmon prints neither
    assert [x.t_s for x in log.samples] == [0, 0, 1, 1, 2, 2]
    assert any("1 s between samples" in n for n in log.notes)


def test_dated_dmon_with_frame_buffer_memory(tmp_path):
    log = load_usage_log(write(tmp_path, DATED_FB))
    assert log.samples[1].t_s - log.samples[0].t_s == 5.0
    assert log.samples[0].memory_used_bytes == 12288 * 2**20


def test_a_malformed_dmon_line_names_the_line(tmp_path):
    bad = PLAIN.replace("    0    120     46      -     52", "    0    120     46      -     5x", 1)
    with pytest.raises(ReportError, match=r"dmon\.txt:5: sm is not a number: '5x'"):
        load_usage_log(write(tmp_path, bad))
    short = PLAIN.replace("    1     55     38      -      0      0      0      0      -      -   1215    210\n", "    1     55\n", 1)
    with pytest.raises(ReportError, match=r"dmon\.txt:4: expected 12 fields"):
        load_usage_log(write(tmp_path, short))


def test_a_last_dmon_line_cut_off_mid_write_is_skipped_with_a_note(tmp_path):
    log = load_usage_log(write(tmp_path, PLAIN + "    0    130     47"))
    assert len(log.samples) == 6 and any("dmon.txt:11: last line cut off mid-write, skipped" in n for n in log.notes)
