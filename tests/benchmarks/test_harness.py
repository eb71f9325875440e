"""benchmarks/harness.py and its staleness hash: one p90, one summary, the scoring ledger, the runner."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness import (ROOFLINE_075, Case, p90, record_scoring, scored_words, summarize,
                                summarize_cases, verdict)
from benchmarks.registry import BENCHMARKS, Benchmark, by_name
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
    scripts = [b for b in BENCHMARKS if "." not in b.name]
    assert scripts and any(not b.excluded for b in scripts)
    for bench in scripts:
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


def test_a_benchmark_whose_input_is_not_committed_is_not_run(monkeypatch, capsys):
    """The hash leaves untracked files out (a clean clone has none), so lone_ops, run before its script was
    committed, read stale from that commit on and had to score its held-out set a second time (2026-12-06)."""
    from benchmarks import run, staleness

    monkeypatch.setattr(staleness.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout=b"benchmarks/lone_ops.py\0src/gpuwise/runtime/new_law.py\0notes.txt\0"))
    assert staleness.untracked_inputs(by_name("lone_ops")) == ["benchmarks/lone_ops.py",
                                                               "src/gpuwise/runtime/new_law.py"]
    assert staleness.untracked_inputs(by_name("guard_save")) == []
    ran = []
    monkeypatch.setattr(run, "_run", lambda bench: ran.append(bench.name) or (0, 0.0))
    assert run.main(["datasheet_ratio", "lone_ops"]) == 2
    err = capsys.readouterr().err
    assert ran == [] and "benchmarks/lone_ops.py" in err and "commit first" in err


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


def _results_for(bench, results_dir):
    """A results JSON recording ``bench``'s current input hashes, as write_results writes it."""
    (results_dir / f"{bench.results}.json").write_text(json.dumps({"inputs": input_hashes(bench)}))


def test_without_the_public_data_only_the_repository_inputs_are_compared(tmp_path, monkeypatch):
    from benchmarks import staleness

    data, results = tmp_path / "public-benchmarks", tmp_path / "results"
    data.mkdir()
    results.mkdir()
    (data / "lambda_train.csv").write_text("gpu,throughput\nA,1\n")
    code = tmp_path / "code.py"
    code.write_text("x = 1\n")
    bench = Benchmark("datasheet_ratio", "ratio", inputs=(str(code), "shared:lambda_train.csv"))
    monkeypatch.setattr(staleness, "DATA", data)
    monkeypatch.setattr(staleness, "RESULTS", results)
    _results_for(bench, results)
    assert "shared:lambda_train.csv" in input_hashes(bench) and staleness.stale_reason(bench) is None

    # a clean clone: no public data folder. The recorded shared hashes are not reported as changed...
    monkeypatch.setattr(staleness, "DATA", tmp_path / "not-here")
    assert not staleness.shared_data_present()
    assert not any(n.startswith("shared:") for n in input_hashes(bench))
    assert staleness.stale_reason(bench) is None
    # ...and a repository input still is
    code.write_text("x = 2\n")
    reason = staleness.stale_reason(bench)
    assert reason and f"changed {code.as_posix()}" in reason and "shared:" not in reason

    # with the data back, a changed data file is stale again
    code.write_text("x = 1\n")
    monkeypatch.setattr(staleness, "DATA", data)
    (data / "lambda_train.csv").write_text("gpu,throughput\nA,2\n")
    assert "changed shared:lambda_train.csv" in staleness.stale_reason(bench)


def test_the_public_data_is_looked_up_in_and_beside_the_checkout_or_where_the_environment_says(tmp_path, monkeypatch):
    from benchmarks import staleness

    repo = tmp_path / "clones" / "gpuwise"
    repo.mkdir(parents=True)
    monkeypatch.delenv(staleness.DATA_ENV, raising=False)
    beside = tmp_path / "clones" / "shared" / "data" / "public-benchmarks"
    beside.mkdir(parents=True)
    assert staleness._shared_data(repo) == beside
    inside = repo / "shared" / "data" / "public-benchmarks"
    inside.mkdir(parents=True)
    assert staleness._shared_data(repo) == inside
    monkeypatch.setenv(staleness.DATA_ENV, str(tmp_path / "elsewhere"))
    assert staleness._shared_data(repo) == tmp_path / "elsewhere"


def test_only_files_git_tracks_enter_a_hash(tmp_path, monkeypatch):
    from benchmarks import staleness

    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    for name in ("pkg/tracked.py", "pkg/scratch.py", "pkg/__pycache__/tracked.cpython-312.pyc"):
        (tmp_path / name).write_text("x\n")
    monkeypatch.setattr(staleness, "REPO", tmp_path)
    monkeypatch.setattr(staleness, "_tracked", lambda: frozenset({"pkg/tracked.py"}))
    hashes = input_hashes(Benchmark("datasheet_ratio", "x", inputs=("pkg/", "pkg/scratch.py")))
    # the script and the harness of this checkout are not in the fake repository: recorded as absent
    assert {n for n, h in hashes.items() if h != "absent"} == {"pkg/tracked.py"}
    assert hashes["pkg/scratch.py"] == "absent"


def test_every_cached_trace_is_committed():
    # time_traces writes a trace it had to make into benchmarks/cache/: one left uncommitted would be read
    # by a benchmark here but is neither hashed nor in a clean clone
    from benchmarks.staleness import _tracked

    tracked = _tracked()
    assert tracked is not None, "not a git checkout"
    cache = REPO / "benchmarks" / "cache"
    untracked = sorted(p.name for p in cache.iterdir() if p.is_file()
                       and p.relative_to(REPO).as_posix() not in tracked)
    assert not untracked, f"git add benchmarks/cache/: {untracked[:5]}"


def test_every_benchmark_make_bench_runs_says_how_long_it_takes():
    for bench in BENCHMARKS:
        assert (bench.minutes > 0) != bool(bench.excluded), bench.name
        assert bench.excluded or bench.timed in ("measured", "results", "estimate"), bench.name
