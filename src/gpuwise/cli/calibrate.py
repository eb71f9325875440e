"""`gpuwise calibrate LOG...`: measured runs make the next prediction better (thin CLI over gpuwise.calibrate).

Also home of ``--no-user-calibration``, shared by estimate, recommend and report.
"""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from gpuwise.cli.common import CatalogOpt, JsonOpt, console, print_json, progress

NoUserCalibrationOpt = Annotated[bool, typer.Option(
    "--no-user-calibration", help="Ignore the calibration `gpuwise calibrate` learnt from your runs: the shipped model.")]


def user_correction(enabled: bool):
    """(the correction of the user's calibration file, its ``GpuCalibration`` of each GPU): when ``enabled`` and
    the file exists; (None, []) otherwise. The command passes the correction to the planner
    (``model_for(..., correction=)``): nothing outlives the call."""
    if not enabled:
        return None, []
    from gpuwise.calibrate import load
    from gpuwise.calibrate.apply import correction

    calibrations = load()
    return correction(calibrations), list(calibrations.values())


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_cmd)


def calibrate_cmd(
    logs: Annotated[Optional[list[str]], typer.Argument(help="Run logs of `gpuwise run --model …` or the guard (workload + step times), measure.py JSON, or exported rows.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="The GPU the runs were measured on (refuses runs on any other).")] = None,
    export: Annotated[Optional[str], typer.Option("--export", help="Write the runs as anonymous JSON rows (one a line) to this file instead of calibrating.")] = None,
    reset: Annotated[bool, typer.Option("--reset", help="Remove your calibration (only --gpu's with --gpu).")] = False,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Make predictions learn from your measured runs (kept in ~/.config/gpuwise/calibration.toml).

    Fits per GPU × operator-class step-time factors, a host term and a memory offset on runs of one GPU;
    estimate, recommend and report then apply them on that GPU and say so (--no-user-calibration: not).
    Without LOG: show the calibration. A bad or partial log refuses the call and changes nothing."""
    from gpuwise import calibrate as cal
    from gpuwise.catalog import load_catalog, resolve_gpu

    path = cal.user_calibration_path()
    cat = load_catalog(catalog)
    if reset:
        removed = cal.reset(resolve_gpu(cat, gpu).id if gpu else None)
        _say(json_out, {"reset": removed, "path": str(path), "gpu": gpu},
             f"{'removed' if removed else 'nothing to remove in'} {path}" + (f" ({gpu})" if gpu else ""))
        return
    if not logs:
        current = cal.load()
        _say(json_out, {"path": str(path), "calibrations": [c.to_dict() for c in current.values()]},
             "\n".join(_describe(c) for c in current.values()) or f"no calibration of yours ({path} does not exist)")
        return
    if export:
        from pathlib import Path

        from gpuwise.calibrate.export import export_row

        target, measurements = cal.checked(logs, cat, gpu)
        rows = [export_row(m, target.id) for m in measurements]
        Path(export).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
        _say(json_out, {"export": export, "rows": rows}, f"{len(rows)} anonymous row(s) written to {export}")
        return
    existing = cal.load()
    with progress(not json_out, "tracing…") as report_progress:
        fitted = cal.calibrate(logs, cat, gpu=gpu, existing=existing, progress=report_progress)
    cal.save({**existing, fitted.gpu: fitted})
    _say(json_out, {"path": str(path), "calibration": fitted.to_dict()}, f"{_describe(fitted)}\nwritten to {path}")


def _describe(c) -> str:
    factors = ", ".join(f"{k} ×{v:.2f}" for k, v in sorted(c.class_factors.items(), key=lambda kv: -abs(kv[1] - 1)))
    memory = (f"{c.memory_offset_bytes / 2**20:+.0f} MiB" if c.memory_offset_bytes is not None
              else "not measured (no run recorded memory figures)")
    return (f"{c.label}: step time factors {factors or 'none'} (classes under 5% of every run's predicted step, "
            f"and classes no run exercised: the shipped model), host +{c.host_s * 1e3:.2f} ms per step beside the "
            f"kernels' issue (a GPU-bound step hides it), "
            f"memory outside the allocator {memory}")


def _say(json_out: bool, obj: dict, text: str) -> None:
    if json_out:
        print_json(obj)
    else:
        console.print(text, highlight=False, markup=False)
