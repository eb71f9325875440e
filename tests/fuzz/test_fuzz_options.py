"""Generated option values through every command (of the type the option declares, so that range checks,
not the parser, are what is tested): exit 0 with sane output, or one line and exit 2; never a traceback,
never a hang. Commands that would serve or trace for long get only the values that must be refused."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .contract import assert_contract, run_cli

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "seed_a100_smi.csv"
FRAMES = ROOT / "tests" / "fixtures" / "replay_two_a100.json"
LLM = "hf:Qwen/Qwen2.5-0.5B"   # the closed form: an answer in milliseconds, no tracing

# A background thread dying (the sampler) is a traceback too, even when the command's exit code is right.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

FUZZ = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# Half plausible values (the answer must then be sane), half the ways values go wrong.
floats = st.floats(0.05, 50) | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -1.0, 1e-9, 1e300])
ints = st.integers(1, 64) | st.integers(-5, 5) | st.integers(-2**40, 2**40)
amounts = st.sampled_from(["15", "¥15", "0", "-3", "nan", "inf", "1e400", "15ZZZ", "$0.5", "", "¥"]) | floats.map(str)
sizes = st.sampled_from(["16GB", "0", "-1GB", "nan", "1e99GB", "lots", ""]) | floats.map(lambda v: f"{v}GB")
shares = st.sampled_from(["10%", "0", "-5%", "100%", "150%", "nan", "0.1", ""]) | floats.map(str)


def check(*argv: str) -> None:
    assert_contract(argv, *run_cli(*argv))


@pytest.fixture(autouse=True)
def replay_backend(monkeypatch):
    monkeypatch.setenv("GPUWISE_MONITOR_BACKEND", f"replay:{FRAMES}")


@FUZZ
@given(ints, floats)
def test_watch_count_and_interval(count, interval_s):
    check("watch", "--json", "--count", str(count), "--interval", repr(interval_s))


@settings(FUZZ, max_examples=8)
@given(floats)
def test_run_interval(tmp_path, interval_s):
    # no --json: in this process stderr is not a file the command's output could be sent to
    # a new run log per example: one that exists is refused (a run log holds one run)
    check("run", "--log", str(tmp_path / f"run-{uuid.uuid4().hex}.db"), "--interval", repr(interval_s), "--",
          sys.executable, "-c", "pass")


@FUZZ
@given(st.one_of(st.integers(-2**20, -1), st.integers(65536, 2**40)), floats)
def test_exporter_refuses_ports_and_intervals_out_of_range(port, interval_s):
    check("exporter", "--json", "--port", str(port), "--interval", repr(interval_s))


@FUZZ
@given(floats.filter(lambda v: not 0 < v < float("inf")))
def test_exporter_refuses_intervals_that_are_not_finite_and_positive(interval_s):
    check("exporter", "--json", "--port", "0", "--interval", repr(interval_s))


@FUZZ
@given(amounts, shares, st.sampled_from(["a100-40gb", "t4", "no-such-gpu", "\x1b[2J"]))
def test_report_prices_headroom_and_gpu(price, headroom, gpu):
    check("report", str(SEED), "--json", "--gpu-price", price, "--headroom", headroom, "--gpu", gpu)


@FUZZ
@given(floats, floats, floats, ints, ints)
def test_advise_targets_and_times(tmp_path_factory, target_loss, step_time_s, progress, total_steps, num_gpus):
    log = tmp_path_factory.getbasetemp() / "curve.csv"
    if not log.exists():
        log.write_text("step,loss\n" + "".join(f"{s},{3.0 / (1 + 0.05 * s):.5f}\n" for s in range(60)))
    check("advise", str(log), "--json", "--target-loss", repr(target_loss), "--step-time-s", repr(step_time_s),
          "--min-progress-per-hour", repr(progress), "--total-steps", str(total_steps), "--num-gpus", str(num_gpus))


@FUZZ
@given(ints.map(str) | st.sampled_from(["auto", "0", "-1", "1.5", ""]), st.none() | ints, ints)
def test_recommend_batch_effective_batch_and_steps(batch, effective, steps):
    argv = ["recommend", LLM, "--json", "--batch-size", batch, "--seq-len", "256", "--steps", str(steps),
            "--gpus", "t4,rtx-4090"]
    if effective is not None:
        argv += ["--effective-batch", str(effective)]
    check(*argv)


@FUZZ
@given(ints.map(str) | st.sampled_from(["0", "-3", "x"]), ints)
def test_estimate_batch_and_seq_len(batch, seq_len):
    check("estimate", LLM, "--json", "--batch-size", batch, "--seq-len", str(seq_len))


@FUZZ
@given(sizes, st.sampled_from(["price", "memory", "cost", ""]))
def test_gpus_min_memory_and_sort(min_memory, sort):
    check("gpus", "--json", "--min-memory", min_memory, "--sort", sort)
