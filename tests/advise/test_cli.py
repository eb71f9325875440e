"""`gpuwise advise`: the --json contract, the plot, the rich output, and exit 2 on bad input."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuwise.cli.app import main

from .curves import plateau_after


def _write_csv(path: Path, steps, loss, step_time_s: float = 0.5) -> Path:
    lines = ["step,loss,lr,t_s"] + [f"{s},{v:.6g},0.001,{1.7e9 + step_time_s * s}" for s, v in zip(steps, loss)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(argv, capsys):
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def plateau_csv(tmp_path_factory):
    s, y = plateau_after(300, n=1000)
    return _write_csv(tmp_path_factory.mktemp("advise") / "plateau.csv", s, y)


def test_json_contract_holds_diagnosis_phases_forecast_noise_scale_advice_plan(plateau_csv, capsys, tmp_path):
    plot = tmp_path / "curve.png"
    code, out, err = _run(["advise", str(plateau_csv), "--json", "--gpu", "a100-80gb-sxm4", "--gpu-price", "¥12",
                           "--target-loss", "0.4", "--plot", str(plot)], capsys)
    assert code == 0, err
    d = json.loads(out)  # stdout is one JSON object and nothing else
    assert d["diagnosis"] == "plateau"
    assert {"diagnosis", "phases", "forecast", "noise_scale", "advice", "plan"} <= set(d)
    assert d["phases"][-1]["kind"] == "plateau" and isinstance(d["phases"][-1]["start_step"], int)
    assert d["forecast"]["available"] and d["forecast"]["family"] in ("exponential", "power_law")
    assert d["forecast"]["steps_to_target"]["step"] is None  # 0.4 is below the plateau at ~0.51
    assert d["noise_scale"] is None
    assert all({"kind", "title", "text", "numbers"} <= set(a) for a in d["advice"])
    assert d["step_time_s"] == pytest.approx(0.5)
    assert d["gpu"]["gpu"] == "a100-80gb-sxm4" and d["gpu"]["price_per_hour"] == 12.0
    assert isinstance(d["plan"], list)
    assert d["plot"] == str(plot) and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rich_output_names_the_diagnosis_and_the_phases(plateau_csv, capsys):
    code, out, _ = _run(["advise", str(plateau_csv)], capsys)
    assert code == 0
    assert "Diagnosis: plateau" in out and "fast descent" in out and "Forecast" in out


def test_malformed_log_exits_2_naming_the_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("step,loss\n0,2.0\n1,1.9\n2,oops\n")
    proc = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "advise", str(bad), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"{bad}:4:" in proc.stderr and "'oops'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--precision", "fp61"], "--precision: unknown value 'fp61'"),
    (["--gpu", "a100-80gbb"], "a100-80gbb"),
    (["--step-time-s", "-1"], "--step-time-s must be positive"),
])
def test_bad_options_exit_2_with_one_line(plateau_csv, capsys, args, message):
    code, out, err = _run(["advise", str(plateau_csv), "--json", *args], capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_diverged_curve_json_has_no_forecast_and_names_the_step(tmp_path, capsys):
    s = np.arange(300)
    y = 2.0 / np.sqrt(s + 1.0)
    y[200:] = np.nan
    code, out, _ = _run(["advise", str(_write_csv(tmp_path / "nan.csv", s, y)), "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["diagnosis"] == "diverged" and d["nan_step"] == 200
    assert d["forecast"] == {"available": False, "reason": "the run diverged"}


def test_gpu_price_is_per_gpu_hour_as_in_report_and_the_old_name_still_prices_all_gpus(plateau_csv, capsys):
    # before: report took --gpu-price (per GPU-hour) and advise --price-per-hour (for all GPUs): two names
    def current(*price):
        code, out, err = _run(["advise", str(plateau_csv), "--json", "--gpu", "a100-80gb-sxm4", "--num-gpus", "2",
                               *price], capsys)
        assert code == 0, err
        return json.loads(out)["gpu"]

    per_gpu, old = current("--gpu-price", "¥6"), current("--price-per-hour", "¥12")
    assert per_gpu["price_per_hour"] == old["price_per_hour"] == 12.0 and per_gpu["count"] == 2
    code, _, err = _run(["advise", str(plateau_csv), "--gpu", "a100-80gb-sxm4", "--gpu-price", "6",
                         "--price-per-hour", "12"], capsys)
    assert code == 2 and "not both" in err and len(err.strip().splitlines()) == 1
