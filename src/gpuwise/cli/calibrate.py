"""`gpuwise calibrate LOG...`: measured runs make the next prediction better (thin CLI over gpuwise.calibrate).

Also home of ``--no-user-calibration``, shared by estimate, recommend and report.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gpuwise.cli.common import CatalogOpt, JsonOpt, console, print_json, progress, text_option

NoUserCalibrationOpt = Annotated[bool, typer.Option(
    "--no-user-calibration", help="Ignore the calibration `gpuwise calibrate` learnt from your runs: the shipped model.")]


def user_correction(enabled: bool, catalog):
    """(the correction of the user's calibration file, its ``GpuCalibration`` of each GPU the catalog knows): when
    ``enabled`` and the file exists; (None, []) otherwise. ``catalog``: the one the command loaded (``--catalog``
    included, whose GPUs a calibration may be of); a table of a GPU it does not know is warned about and left out. The command passes the correction to
    the planner (``model_for(..., correction=)``): nothing outlives the call. A file that cannot be read is warned
    about in one line and refuses only where it is applied (``apply.Refusing``): a report of a log without a workload
    goes on."""
    if not enabled:
        return None, []
    from gpuwise.calibrate import CalibrateError, load
    from gpuwise.calibrate.apply import Refusing, correction
    from gpuwise.calibrate.store import applicable

    try:
        stored = load()
    except CalibrateError as exc:
        refusing = Refusing(exc)
        _warn_unless_applied(refusing)
        return refusing, []
    if not stored:
        return correction(stored, catalog), []
    calibrations = applicable(stored, catalog)
    return correction(calibrations, catalog), list(calibrations.values())


def _warn_unless_applied(refusing) -> None:
    """One warning line with the damage, when the command ends without applying the calibration (a command that
    applies it fails on it, in one line: the error's); at once outside a command."""
    import logging

    try:     # typer runs its own copy of click (as cli.common.option_defaulted reads it)
        from typer._click.globals import get_current_context
    except ImportError:     # pragma: no cover - depends on the typer installed
        from click.globals import get_current_context

    def warn() -> None:
        if not refusing.applied:
            logging.getLogger("gpuwise.calibrate").warning("%s (not needed by this command: it goes on)", refusing.error)

    ctx = get_current_context(silent=True)
    if ctx is None:
        warn()
    else:
        ctx.call_on_close(warn)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_cmd)


def calibrate_cmd(
    logs: Annotated[Optional[list[str]], typer.Argument(help="Run logs of `gpuwise run --model …` or the guard (workload + step times), measure.py JSON, or exported rows.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="The GPU the runs were measured on (refuses runs on any other).")] = None,
    export: Annotated[Optional[str], typer.Option("--export", help="Write the runs as anonymous JSON rows (one a line) to this new file instead of calibrating (an existing file is refused).")] = None,
    reset: Annotated[bool, typer.Option("--reset", help="Remove your calibration (only --gpu's with --gpu); a damaged file is moved aside, not deleted.")] = False,
    forget: Annotated[Optional[str], typer.Option("--forget", metavar="RUN", help="Drop one run ('last', or the fingerprint `gpuwise calibrate` lists) and refit its GPU on the others.")] = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Make predictions learn from your measured runs (kept in ~/.config/gpuwise/calibration.toml).

    Fits per GPU × operator-class step-time factors, a host term and a memory offset on runs of one GPU;
    estimate, recommend and report then apply them on that GPU and say so (--no-user-calibration: not).
    Without LOG: show the calibration and its runs. A bad or partial log refuses the call and changes nothing."""
    from gpuwise import calibrate as cal
    from gpuwise.calibrate.explain import describe, describe_runs
    from gpuwise.calibrate.calibration import duration_text
    from gpuwise.calibrate.store import applicable
    from gpuwise.catalog import load_catalog, resolve_gpu

    _check_paths(logs, gpu, export, forget)
    path = cal.user_calibration_path()
    cat = load_catalog(catalog)
    # --reset --gpu also takes a table's own name: one of a GPU the catalog does not know is removed so
    gpu_id = gpu if reset and gpu and gpu in _stored_tables() else resolve_gpu(cat, gpu).id if gpu else None
    if forget is not None and (logs or reset or export):
        raise cal.CalibrateError("--forget takes no LOG, --reset or --export: forget a run, then calibrate")
    if reset:
        done = cal.reset(gpu_id)
        text = done.words(path, gpu_id)
        _say(json_out, {"reset": done.removed, "path": str(path), "gpu": gpu,
                        "backup": str(done.backup) if done.backup else None, "kept": list(done.kept)}, text)
        return
    if forget is not None:
        gone = cal.forget(forget, gpu_id)
        left = (describe(gone.calibration) if gone.calibration is not None
                else f"no run of {gone.gpu} left: its calibration is removed")
        where = f"written to {path}" if path.exists() else f"removed {path}: no calibration left"
        _say(json_out, {"path": str(path), "forgotten": gone.run.fingerprint, "gpu": gone.gpu,
                        "calibration": gone.calibration.to_dict() if gone.calibration else None},
             f"forgot run {gone.run.fingerprint} on {gone.gpu} (measured "
             f"{duration_text(gone.run.measured_step_time_s)} a step)\n{left}\n{where}")
        return
    if not logs:
        current = cal.load()
        applicable(current, cat, path)         # warns of a table no GPU of the catalog has; all are listed
        _say(json_out, {"path": str(path), "calibrations": [c.to_dict() for c in current.values()]},
             "\n".join("\n".join([describe(c), *describe_runs(c)]) for c in current.values())
             or f"no calibration of yours ({path} does not exist)")
        return
    if export:
        from gpuwise.calibrate.export import check_target, export_rows, write_rows

        check_target(export, logs)          # before any row is made: a refused target warns of nothing
        target, measurements = cal.checked(logs, cat, gpu)
        rows = export_rows(measurements, target.id)
        write_rows(export, rows, inputs=logs)
        _say(json_out, {"export": export, "rows": rows}, f"{len(rows)} anonymous row(s) written to {export}")
        return
    existing = cal.load()
    with progress(not json_out, "tracing…") as report_progress:
        fitted = cal.calibrate(logs, cat, gpu=gpu, existing=existing, progress=report_progress)
    cal.save({**existing, fitted.gpu: fitted})
    _say(json_out, {"path": str(path), "calibration": fitted.to_dict()}, f"{describe(fitted)}\nwritten to {path}")


def _check_paths(logs: list[str] | None, gpu: str | None, export: str | None, forget: str | None) -> None:
    """Up front, one line and exit 2: an empty LOG, --gpu, --export or --forget (``Path('')`` is the current
    directory), and --export with no LOG (nothing to export: an exit 0 that wrote nothing would pass for done)."""
    from gpuwise.calibrate import CalibrateError
    from gpuwise.calibrate.export import check_target

    for log in logs or ():
        text_option("LOG", log, names="file", give="a run log's path", unset=None)
    text_option("--gpu", gpu, names="GPU", give="a GPU's name", unset="the runs' own GPU")
    text_option("--forget", forget, names="run", give="'last' or a run's fingerprint", unset="none")
    if text_option("--export", export, names="file", give="a new file's path", unset="calibrating") is not None:
        check_target(export, logs or ())      # a directory or an existing file: refused, LOG given or not
        if not logs and forget is None:
            raise CalibrateError("--export writes the runs of LOG... as rows: give the run logs to export "
                                 "(gpuwise calibrate LOG... --export FILE); nothing written")


def _stored_tables() -> set[str]:
    """The GPU tables of the calibration file (none when it cannot be read: --reset moves it aside whole)."""
    from gpuwise import calibrate as cal

    try:
        return set(cal.load())
    except cal.CalibrateError:
        return set()


def _say(json_out: bool, obj: dict, text: str) -> None:
    if json_out:
        print_json(obj)
    else:
        console.print(text, highlight=False, markup=False)
