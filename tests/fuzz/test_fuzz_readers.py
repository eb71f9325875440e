"""Generated files through every reader, by the command users run on them (``report``, ``advise``) and by
the guard's and the workload's readers: exit 0 with sane output, or one line and exit 2 (the part's
error); never a traceback, never a hang."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.errors import GpuwiseError
from gpuwise.guard import CheckpointStore
from gpuwise.guard.manifest import Manifest
from gpuwise.runlog import GPU_SAMPLE_COLUMNS, RunLog
from gpuwise.text import printable
from gpuwise.workload.config_checks import check_config

from .contract import assert_contract, no_hang, run_cli

# A background thread dying (the sampler) is a traceback too, even when the command's exit code is right.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# Numbers as logs print them, and the ways they go wrong.
numbers = st.one_of(
    st.integers(-10**6, 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 100, 101, 500, -1, 1e20, 1e308, 40960, 81920]),
)
hostile_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["\x1b[2J", "NVIDIA \x1b]0;x\x07A100", "[N/A]", "[Not Supported]", "[GPU is lost]", "", "\u202eA100", "1e5"])
cells = st.one_of(numbers.map(str), numbers.map(lambda v: f"{v} %"), numbers.map(lambda v: f"{v} MiB"),
                  numbers.map(lambda v: f"{v} W"), hostile_text)

SMI_HEADER = ["timestamp", "name", "index", "utilization.gpu [%]", "memory.used [MiB]", "memory.total [MiB]",
              "power.draw [W]"]


def _write(suffix: str, data: str | bytes) -> Path:
    path = Path(tempfile.mkdtemp(prefix="gpuwise-fuzz-")) / f"log{suffix}"
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    return path


def _report(path: Path, *extra: str) -> None:
    argv = ("report", str(path), *extra, "--json")
    assert_contract(argv, *run_cli(*argv))


@FUZZ
@given(st.lists(st.lists(cells, min_size=6, max_size=8), min_size=1, max_size=6))
def test_report_on_generated_nvidia_smi_csv(rows):
    lines = [", ".join(SMI_HEADER)]
    for k, row in enumerate(rows):
        lines.append(", ".join([f"2026/11/20 10:00:{k:02d}.000", *row]))
    _report(_write(".csv", "\n".join(lines) + "\n"))


@FUZZ
@given(st.lists(st.tuples(st.floats(-10, 600), st.integers(-100, 90_000), st.sampled_from([40_960, 81_920, 0, -1]),
                          st.floats(-10, 800) | st.just(float("nan"))), min_size=2, max_size=30))
def test_report_on_plausible_nvidia_smi_csv_near_the_physical_limits(rows):
    lines = [", ".join(SMI_HEADER)]
    for k, (util, used, total, power) in enumerate(rows):
        lines.append(f"2026/11/20 10:{k // 60:02d}:{k % 60:02d}.000, NVIDIA A100-SXM4-40GB, 0, {util:.1f} %, "
                     f"{used} MiB, {total} MiB, {power:.2f} W")
    _report(_write(".csv", "\n".join(lines) + "\n"), "--gpu-price", "¥15")


@FUZZ
@given(st.lists(st.lists(st.one_of(numbers.map(str), st.just("-"), hostile_text), min_size=5, max_size=6),
                min_size=1, max_size=6))
def test_report_on_generated_dmon_log(rows):
    text = "# gpu    pwr  gtemp     sm    mem     fb\n# Idx      W      C      %      %     MB\n"
    text += "".join("    " + "  ".join(str(c).replace(" ", "") or "0" for c in row) + "\n" for row in rows)
    _report(_write(".log", text), "--gpu", "a100-40gb")


sql_values = st.one_of(st.none(), numbers, hostile_text, st.binary(max_size=6), st.booleans())


@FUZZ
@given(st.lists(st.fixed_dictionaries({name: sql_values for name, _ in GPU_SAMPLE_COLUMNS
                                       if name not in ("t_s", "gpu_index", "lost")}), min_size=1, max_size=4),
       st.lists(numbers, min_size=4, max_size=4))
def test_report_on_a_run_log_with_any_types_in_its_columns(rows, times):
    path = _write(".db", b"")
    path.unlink()
    RunLog(path).close()
    with sqlite3.connect(path) as conn:
        for k, row in enumerate(rows):
            names = ["t_s", "gpu_index", *row]
            t = times[k % len(times)]
            values = [t if isinstance(t, int) or t == t else 0.0, 0, *row.values()]
            conn.execute(f"INSERT INTO gpu_samples ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                         [v if not isinstance(v, int) or abs(v) < 2**63 else float(v) for v in values])
    _report(path)


json_values = st.recursive(
    st.none() | st.booleans() | numbers | hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3), max_leaves=8)


@FUZZ
@given(st.lists(st.fixed_dictionaries({"step": json_values, "loss": json_values},
                                      optional={"lr": json_values, "batch_size": json_values, "t_s": json_values}),
                min_size=1, max_size=8), st.integers(0, 3000))
def test_advise_on_generated_jsonl(records, depth):
    lines = [json.dumps(r, allow_nan=True) for r in records]
    lines.append('{"step": 999, "loss": ' + "[" * depth + "]" * depth + "}")
    argv = ("advise", str(_write(".jsonl", "\n".join(lines) + "\n")), "--json")
    assert_contract(argv, *run_cli(*argv))


@FUZZ
@given(st.lists(st.tuples(st.floats(0.01, 10) | st.floats(allow_nan=True, allow_infinity=True),
                          st.floats(0, 1e-2) | st.floats(-1, 1), st.integers(1, 512) | st.integers(-2, 0)),
                min_size=3, max_size=60))
def test_advise_on_plausible_curves_near_the_limits(points):
    text = "step,loss,lr,batch_size\n" + "".join(f"{k},{loss!r},{lr!r},{b}\n" for k, (loss, lr, b) in enumerate(points))
    argv = ("advise", str(_write(".csv", text)), "--json")
    assert_contract(argv, *run_cli(*argv))


@FUZZ
@given(st.lists(st.lists(cells, min_size=2, max_size=4), min_size=1, max_size=8))
def test_advise_on_generated_csv(rows):
    text = "step,loss,lr,batch_size\n" + "\n".join(",".join(r) for r in rows) + "\n"
    argv = ("advise", str(_write(".csv", text)), "--json")
    assert_contract(argv, *run_cli(*argv))


@FUZZ
@given(st.binary(max_size=300))
def test_any_bytes_as_a_log(data):
    for suffix in (".csv", ".jsonl", ".txt"):
        path = _write(suffix, data)
        for argv in (("report", str(path), "--json"), ("advise", str(path), "--json")):
            assert_contract(argv, *run_cli(*argv))


@FUZZ
@given(json_values)
def test_any_json_as_a_checkpoint_manifest(manifest):
    root = Path(tempfile.mkdtemp(prefix="gpuwise-fuzz-ckpt-"))
    step = root / "step-000000001"
    step.mkdir()
    (step / "state.pt").write_bytes(b"x")
    (step / "manifest.json").write_text(json.dumps(manifest, allow_nan=True))
    with no_hang():
        ckpt, skipped = CheckpointStore(root).latest()
    assert ckpt is None and len(skipped) == 1  # nothing generated can carry state.pt's real sha256
    try:
        Manifest.from_json(json.dumps(manifest, allow_nan=True))
    except GpuwiseError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(json_values)
def test_any_json_as_a_model_config(config):
    try:
        checked = check_config(config, "config.json")
    except GpuwiseError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(checked, dict)


@FUZZ
@given(st.text(max_size=40))
def test_printable_text_has_no_control_characters_and_is_stable(text):
    clean = printable(text)
    assert not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in clean)
    assert printable(clean) == clean
