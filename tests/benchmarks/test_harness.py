"""benchmarks/harness.py and its staleness hash: one p90, one summary, the scoring ledger, the runner."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness import (ROOFLINE_075, Case, p90, record_scoring, scored_words, summarize,
                                summarize_cases, verdict)
from benchmarks.registry import BENCHMARKS, Benchmark
from benchmarks.staleness import REPO, combined_hash, input_hashes


def test_p90_is_the_nearest_rank_value_of_the_data():
    assert p90(range(1, 11)) == 9            # ceil(0.9 * 10) = 9th smallest
    assert p90(range(1, 12)) == 10           # ceil(9.9) = 10th of 11
    assert p90([5.0]) == 5.0
    with pytest.raises(ValueError):
        p90([])


def test_summary_reports_signed_and_absolute_error_and_the_share_low():
    s = summarize([-0.2, 0.1, 0.3, -0.4, 0.0])
    assert (s.n, s.worst_abs) == (5, 0.4)
    assert s.median_abs == pytest.approx(0.2)
    assert s.signed_median == pytest.approx(0.0)
    assert (s.share_low, s.share_high) == (0.4, 0.4)
    assert s.cell().startswith("20.0% / 40.0% / 40.0% (+0.0%, 40% low, n=5)")


def test_verdict_says_in_words_when_the_model_does_not_beat_the_baseline():
    rows = [Case(f"c{i}", "set", "test", predicted=1.3, measured=1.0, units="s",
                 baselines={ROOFLINE_075: 1.1}) for i in range(3)]
    assert summarize_cases(rows, ROOFLINE_075).median_abs == pytest.approx(0.1)
    assert "does not beat roofline / 0.75" in verdict(rows)
    better = [Case("c", "set", "test", predicted=1.05, measured=1.0, units="s", baselines={ROOFLINE_075: 1.4})]
    assert verdict(better).startswith("On these 1 rows gpuwise beats roofline / 0.75")


def test_each_scoring_adds_one_to_the_ledger_and_is_printed(tmp_path):
    ledger = tmp_path / "ledger.json"
    ledger.write_text(json.dumps({"sets": {"time: test": {"scored": 2, "before_ledger": 3}}}))
    assert record_scoring("time: test", ledger=ledger) == 3
    assert record_scoring("new set", ledger=ledger) == 1
    doc = json.loads(ledger.read_text())
    assert doc["sets"]["time: test"]["scored"] == 3 and doc["sets"]["new set"]["scored"] == 1
    assert scored_words("time: test", ledger=ledger) == (
        "held-out set scored 3 times by the harness, at least 3 before it (benchmarks/README.md)")


def test_the_hash_changes_when_an_input_changes_appears_or_goes(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    bench = Benchmark("datasheet_ratio", "x", inputs=(str(data), str(tmp_path / "not-yet")))
    before = input_hashes(bench)
    assert before[str(tmp_path / "not-yet")] == "absent"
    data.write_text("a,b\n1,3\n")
    after = input_hashes(bench)
    assert after[data.as_posix()] != before[data.as_posix()]
    assert combined_hash(after) != combined_hash(before)
    (tmp_path / "not-yet").mkdir()
    (tmp_path / "not-yet" / "gpu.json").write_text("{}")
    assert (tmp_path / "not-yet" / "gpu.json").as_posix() in input_hashes(bench)


def test_every_registered_script_exists_uses_the_harness_and_patches_no_sys_path():
    # benchmarks/gpu/ and benchmarks/contributed/ are standalone files, run where gpuwise may not be installed
    for bench in [b for b in BENCHMARKS if "." not in b.name]:
        source = (REPO / bench.script).read_text()
        assert "sys.path" not in source, bench.script
        if not bench.excluded:
            assert "write_results(" in source, f"{bench.script} does not write through the harness"


def test_run_check_names_the_stale_file_and_the_command():
    r = subprocess.run([sys.executable, "-m", "benchmarks.run", "--check", "datasheet_ratio"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    if r.returncode == 1:
        assert "benchmarks/results/datasheet_ratio.json" in r.stdout and "python -m benchmarks.run" in r.stdout
    else:
        assert r.stdout.strip() == "every results file is fresh"
    bad = subprocess.run([sys.executable, "-m", "benchmarks.run", "no_such_bench"], cwd=REPO,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no benchmark 'no_such_bench'" in bad.stderr


def test_a_speed_benchmark_refuses_a_loaded_machine_unless_told(monkeypatch, capsys):
    from benchmarks import machine

    monkeypatch.setattr(machine.os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    monkeypatch.delenv(machine.ALLOW_ENV, raising=False)
    with pytest.raises(SystemExit) as e:
        machine.require_quiet_machine("host_overhead")
    assert e.value.code == machine.BUSY_EXIT
    assert "host_overhead: load average" in capsys.readouterr().err
    monkeypatch.setenv(machine.ALLOW_ENV, "1")
    machine.require_quiet_machine("host_overhead")
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    monkeypatch.delenv(machine.ALLOW_ENV)
    machine.require_quiet_machine("host_overhead")
