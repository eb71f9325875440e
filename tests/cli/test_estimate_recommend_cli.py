"""The public contracts of `gpuwise estimate` and `gpuwise recommend` (DESIGN.md), end to end through
the real command, the real tracer and the real catalog."""

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from gpuwise.cli.app import main

MEMORY_KEYS = {"peak_allocated_bytes", "peak_reserved_bytes", "cuda_context_bytes", "total_bytes",
               "weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes"}
OPTION_KEYS = {"gpu", "count", "fits", "batch_size", "peak_total_bytes", "step_time_s", "total_time_s",
               "total_cost", "currency", "provider", "excluded_because"}
SMALL = ["torchvision:resnet18", "--batch-size", "4", "--image-size", "64"]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def gpuwise(capsys):
    """Runs the real command in this process (one torch import for the whole file)."""

    def run(*args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        out, err = capsys.readouterr()
        code = exit_info.value.code
        return Result(code if isinstance(code, int) else (0 if code is None else 1), out, err)

    return run


def test_the_console_script_runs_as_a_subprocess():
    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", "torchvision:resnet5O"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "did you mean" in r.stderr


def test_estimate_json_holds_memory_and_time_for_a_gpu(gpuwise):
    r = gpuwise("estimate", *SMALL, "--gpu", "Tesla_T4", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert MEMORY_KEYS <= set(out["memory"])
    m = out["memory"]
    assert m["total_bytes"] == m["peak_reserved_bytes"] + m["cuda_context_bytes"]
    assert m["peak_reserved_bytes"] >= m["peak_allocated_bytes"] > 0
    assert out["time"]["gpu"] == "t4"
    assert out["time"]["step_time_s"] > 0 and out["time"]["samples_per_s"] > 0
    assert out["fits"] is True


def test_estimate_without_gpu_has_null_time(gpuwise):
    r = gpuwise("estimate", *SMALL, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["time"] is None


def test_estimate_max_batch_fits_and_the_next_power_of_two_does_not(gpuwise):
    r = gpuwise("estimate", *SMALL, "--gpu", "t4", "--max-batch", "--json")
    assert r.returncode == 0, r.stderr
    largest = json.loads(r.stdout)["max_batch_size"]
    assert largest >= 4
    at = json.loads(gpuwise("estimate", "torchvision:resnet18", "--image-size", "64", "--batch-size", str(largest),
                            "--gpu", "t4", "--json").stdout)
    assert at["fits"] is True


def test_recommend_json_contract_and_a_best_option(gpuwise):
    r = gpuwise("recommend", *SMALL, "--steps", "1000", "--gpus", "t4,rtx-4090,a100-40gb-sxm4", "--max-gpus", "2",
                "--no-remedies", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"workload", "options", "best", "fastest"}
    assert out["options"] and all(OPTION_KEYS <= set(o) for o in out["options"])
    assert {o["gpu"] for o in out["options"]} <= {"t4", "rtx-4090", "a100-40gb-sxm4"}
    best = out["best"]
    assert best["fits"] and best["excluded_because"] is None
    eligible = [o for o in out["options"] if o["excluded_because"] is None]
    assert best["total_cost"] == min(o["total_cost"] for o in eligible if o["currency"] == best["currency"])


def test_recommend_with_an_impossible_deadline_answers_nothing_meets_with_exit_0(gpuwise):
    r = gpuwise("recommend", *SMALL, "--steps", "100000", "--gpus", "t4,rtx-4090", "--deadline", "1s",
                "--no-remedies", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["best"] is None and out["nothing_meets"].startswith("nothing meets the deadline")
    assert out["closest"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["estimate", "torchvision:resnet5O"], "resnet50"),
        (["estimate", *SMALL, "--gpu", "a100-40"], "a100"),
        (["estimate", *SMALL, "--precision", "fp64"], "fp64"),
        (["recommend", *SMALL, "--steps", "10", "--deadline", "soon"], "soon"),
        (["recommend", *SMALL, "--steps", "10", "--budget", "lots"], "lots"),
        (["recommend", *SMALL, "--steps", "10", "--provider", "autodll"], "autodl"),
        (["recommend", *SMALL], "--samples"),
        (["estimate", "torchvision:resnet18", "--batch-size", "0"], "--batch-size"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_it(gpuwise, args, needle):
    r = gpuwise(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_plots_are_written_as_png(gpuwise, tmp_path):
    rec_png, est_png = tmp_path / "rec.png", tmp_path / "est.png"
    r = gpuwise("recommend", *SMALL, "--steps", "100", "--gpus", "t4,rtx-4090", "--no-remedies", "--deadline", "1h",
                "--plot", str(rec_png))
    assert r.returncode == 0, r.stderr
    r = gpuwise("estimate", *SMALL, "--gpu", "t4", "--plot", str(est_png))
    assert r.returncode == 0, r.stderr
    for png in (rec_png, est_png):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
