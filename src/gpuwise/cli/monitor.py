"""`gpuwise watch`, `gpuwise run -- CMD`, `gpuwise exporter`: thin commands over gpuwise.monitor."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Optional

import typer

from gpuwise.cli.common import JsonOpt, check_option, console, err_console, print_json, text_option
from gpuwise.cli.calibrate import NoUserCalibrationOpt, user_correction
from gpuwise.cli.workload_options import workload_options, workload_or_checked
from gpuwise.workload.model import check_precision

IntervalOpt = Annotated[float, typer.Option("--interval", help="Seconds between samples (0.1 = 10 Hz, the fastest).")]
LogOpt = Annotated[Optional[str], typer.Option("--log", help="Write the samples to this run log (SQLite).")]
RunLogOpt = Annotated[Optional[str], typer.Option(
    "--log", help="The run log to write (SQLite), a new file: one that exists is refused (a run log holds one run). "
                  "Default: a new ./gpuwise-run-YYYYmmdd-HHMMSS.db (-2, -3, ... when that name is taken).")]


def _sampler(interval_s: float, log: str | None):
    """A sampler over the NVML backend (writing to ``log`` when given, with its meta), or None when there is
    no driver (said in one line). A bad interval: one line, exit 2, before anything is opened."""
    from gpuwise.monitor import NoDriverError, open_backend
    from gpuwise.monitor.sampler import check_interval_s, open_sampler

    check_interval_s(interval_s)
    text_option("--log", log, names="file", give="a new run log's path", unset="no run log")
    try:
        backend = open_backend()
    except NoDriverError as exc:
        _no_driver(exc)
        return None
    try:
        return open_sampler(backend, interval_s=interval_s, log_path=log)
    except BaseException:
        backend.close()
        raise


def _processes(backend):
    """The processes on the GPUs at the last sample (PID, user, memory, command); None where the backend
    cannot list them."""
    listing = getattr(backend, "processes", None)
    return listing() if callable(listing) else None


def _watch_filter(gpu: list[str] | None, user: list[str] | None, pid: list[str] | None):
    """The watch filter from the options; a GPU index or pid that is not a whole number: one line, exit 2."""
    from gpuwise.monitor.watch_filter import WatchFilter, split_values

    for option, values, names in (("--gpu", gpu, "GPU"), ("--user", user, "user"), ("--pid", pid, "process")):
        for value in values or ():      # an empty one narrows to nothing: refused, not read as "every one"
            text_option(option, value, names=names, give="one or more, comma-separated", unset="all")

    def whole(option: str, values: list[str] | None) -> frozenset[int]:
        out = set()
        for v in split_values(values):
            check_option(v.isdigit(), option, v, "a whole number >= 0 (repeat or comma-separate several)")
            out.add(int(v))
        return frozenset(out)

    return WatchFilter(gpu_indices=whole("--gpu", gpu), users=frozenset(split_values(user)), pids=whole("--pid", pid))


def _check_gpus_exist(narrow, history) -> None:
    """--gpu naming no GPU of this machine: one line, exit 2 (an empty table would look like a lost GPU)."""
    present = sorted({key[0] for key in history})
    missing = sorted(i for i in narrow.gpu_indices if i not in present)
    if missing and present:
        from gpuwise.errors import GpuwiseError

        raise GpuwiseError(f"--gpu {', '.join(map(str, missing))}: no such GPU here "
                           f"(GPUs {', '.join(map(str, present))})")


def _check_filter_applies(narrow, sampler) -> None:
    """After the first sample, before anything is shown: --gpu naming no GPU here, or --user/--pid over a backend
    that lists no processes (a run log's replay), is one line, exit 2."""
    _check_gpus_exist(narrow, sampler.history())
    backend = sampler.backend
    narrow.check_applies(_processes(backend), getattr(backend, "source", backend.name))


def _watch_json(sampler, narrow) -> None:
    """``watch --json``: one snapshot as one JSON object."""
    backend = sampler.backend
    samples = [s for s in sampler.sample_once() if narrow.keeps_gpu(s.gpu_index)]
    _check_filter_applies(narrow, sampler)
    procs = narrow.processes(_processes(backend))
    print_json({"available": True, "backend": backend.name, "driver_version": backend.driver_version(),
                "t_s": samples[0].t_s if samples else time.time(),
                "filter": narrow.to_dict(),
                "gpus": [s.to_row() for s in samples],
                "processes": None if procs is None else [p.to_dict() for p in procs]})


def _watch_views(sampler, narrow, count: int, stop):
    """Samples and shows the view at each interval until ``stop`` is set or ``count`` views were shown; yields
    after each view. The first sample is taken, and --gpu checked, before any view."""
    from contextlib import nullcontext

    from rich.live import Live

    from gpuwise.monitor.live import render_live, render_watch
    from gpuwise.monitor.sampler import next_sample_at
    from gpuwise.text import for_console

    backend = sampler.backend
    only = f"; only {narrow.describe()}" if narrow.narrows else ""
    title = for_console(f"gpuwise watch: {backend.name}, driver {backend.driver_version() or '?'}, "
                        f"every {sampler.interval_s:g} s{only}")
    due_s = time.monotonic()
    sampler.sample_once()                       # the first sample before the view: the filter checked
    _check_filter_applies(narrow, sampler)
    # On a terminal the view is redrawn in place; into a pipe or a file it is printed whole at each
    # sample, the time it was drawn under the title (as nvidia-smi -l prints its report each interval).
    in_place = console.is_terminal
    with (Live(render_live({}, title), console=console, auto_refresh=False) if in_place else nullcontext()) as live:
        taken = 0
        while not stop.is_set():
            if taken:
                sampler.sample_once()
            taken += 1
            every = _processes(backend)
            shown = narrow.processes(every)
            hidden = (sum(narrow.keeps_gpu(r.gpu_index) for r in every) - len(shown)
                      if narrow.narrows and every is not None else None)
            heading = title if in_place else f"{title}\n{time.strftime('%Y-%m-%d %H:%M:%S')}"
            view = render_watch(narrow.history(sampler.history()), shown, heading, hidden=hidden,
                                narrowed_to=narrow.describe(), max_columns=console.width)
            if live is not None:
                live.update(view, refresh=True)
            else:
                console.print(view)
                console.line()
                console.file.flush()
            yield
            if count and taken >= count:
                break
            due_s, delay_s = next_sample_at(due_s, time.monotonic(), sampler.interval_s)
            stop.wait(delay_s)
    if in_place:
        console.line()      # the shell prompt on a line of its own after the last view


def _report_options(gpu_price: str | None, provider: str | None):
    """``run``'s report options, checked as ``report`` checks them (one line, exit 2) before the command
    starts: (amount, currency) or None, the provider as the catalog spells it or None."""
    from gpuwise.report.build import price_options

    catalog = None
    if provider is not None:
        from gpuwise.catalog import load_catalog

        catalog = load_catalog()
    return price_options(catalog, gpu_price=gpu_price, provider=provider)


def _raise_broken_pipe() -> None:
    raise BrokenPipeError


def _stdout_closed() -> None:
    """Stdout's reader went away (a closed pipe): what is still buffered for it, and anything printed later,
    goes nowhere, so the command ends quietly with exit 0 (as after Ctrl-C) instead of failing at exit."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _no_driver(exc: Exception) -> None:
    """One line on stderr and exit 1: there is nothing to watch here (not bad input, so not exit 2). With
    --json too: like every other command's errors, nothing on stdout."""
    print(f"gpuwise: {exc}", file=sys.stderr)
    raise typer.Exit(1)


def _print_run_result(result, report, problem: str | None, json_out: bool) -> None:
    if json_out:
        print_json({"exit_code": result.exit_code, "signal": result.signal, "log": str(result.log_path),
                    "sampled": result.sampled, "samples": result.samples_taken, "duration_s": result.duration_s,
                    "signals_forwarded": result.forwarded, "killed": result.killed,
                    "left_running": result.left_running, "problem": problem,
                    "report": report.to_dict() if report else None})
        return
    if report is not None:
        from gpuwise.report.text import render_report

        err_console.print(render_report(report))
    elif problem:
        err_console.print(f"gpuwise: {problem}")
    err_console.print(f"gpuwise: run log {result.log_path}; exit code {result.exit_code}")


def register(app: typer.Typer) -> None:
    @app.command("watch")
    def watch_cmd(
        interval: IntervalOpt = 1.0,
        log: LogOpt = None,
        count: Annotated[int, typer.Option("--count", help="Stop after this many samples (0: until Ctrl-C).")] = 0,
        gpu: Annotated[Optional[list[str]], typer.Option(
            "--gpu", help="Only these GPUs, by index (repeat or comma-separate: --gpu 0,2).")] = None,
        user: Annotated[Optional[list[str]], typer.Option(
            "--user", help="Only processes of these users (repeat or comma-separate).")] = None,
        pid: Annotated[Optional[list[str]], typer.Option(
            "--pid", help="Only these processes and their children (a torchrun's workers; repeat or comma-separate).")] = None,
        json_out: JsonOpt = False,
    ) -> None:
        """A live view of every GPU (and MIG instance) with a short history of use and memory, and the
        processes on them; --gpu, --user and --pid narrow it; --json prints one snapshot."""
        from gpuwise.monitor.sampler import close_sampler
        from gpuwise.monitor.stop_signals import stop_on_signals

        check_option(count >= 0, "--count", count, "a whole number >= 0 (0: until Ctrl-C)")
        narrow = _watch_filter(gpu, user, pid)
        # The stop handlers first: a SIGTERM from the moment the run log exists ends it with its end written.
        with stop_on_signals() as stop:
            sampler = _sampler(interval, log)
            if sampler is None:
                return
            shown = False       # a view (or the --json snapshot) was shown: the run log holds a run to keep
            discard = False     # failed before that (--gpu naming no GPU here): no run log left behind
            try:
                if json_out:
                    _watch_json(sampler, narrow)
                    shown = True
                    return
                # rich's answer to a closed pipe is SystemExit(1): here it ends the view as Ctrl-C does
                console.on_broken_pipe = _raise_broken_pipe
                for _ in _watch_views(sampler, narrow, count, stop):
                    shown = True
            except KeyboardInterrupt:
                pass
            except BrokenPipeError:     # `watch | head`: the reader has what it wanted; the log is kept
                console.quiet = True
                _stdout_closed()
            except BaseException:
                discard = not shown
                raise
            finally:
                vars(console).pop("on_broken_pipe", None)
                close_sampler(sampler, discard_log_file=discard)

    @app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    @workload_options()
    def run_cmd(
        cmd: Annotated[Optional[list[str]], typer.Argument(help="The command and its arguments, after --.")] = None,
        log: RunLogOpt = None,
        interval: IntervalOpt = 1.0,
        torch_hook: Annotated[bool, typer.Option(
            "--torch-hook", help="Record PyTorch's peak allocated/reserved memory at the exit of Python children.")] = False,
        gpu_price: Annotated[Optional[str], typer.Option("--gpu-price", help="Price per GPU-hour paid, for the report.")] = None,
        provider: Annotated[Optional[str], typer.Option("--provider", help="Compare prices of this provider only.")] = None,
        model: Annotated[Optional[str], typer.Option("--model", help="The job's model (as for estimate, with the same workload options): the run log records the workload, the report compares the run with gpuwise's prediction, and `gpuwise calibrate` learns from it.")] = None,
        kill_after: Annotated[float, typer.Option(
            "--kill-after", help="Seconds the command has to stop after a SIGTERM/SIGINT/SIGHUP/SIGQUIT passed on, "
                                 "then SIGKILL (also: the grace period after gpuwise itself is killed).")] = 30.0,
        no_user_calibration: NoUserCalibrationOpt = False,
        json_out: JsonOpt = False,
        *,
        workload_kwargs: dict,
    ) -> None:
        """Run CMD, sample the GPUs until it ends, pass every signal on, exit with its exit code, print the report."""
        from gpuwise.errors import GpuwiseError
        from gpuwise.monitor.runner import run_command

        if not cmd:
            raise GpuwiseError("gpuwise run needs a command: gpuwise run [options] -- CMD ARGS...")
        text_option("--log", log, names="file", give="a new run log's path", unset="a new ./gpuwise-run-<date>.db")
        # bad input, --model or not: before the run; without --model, --precision sets the report's datasheet ratio
        workload = workload_or_checked(model, workload_kwargs, used_without_model=("precision",))
        given = workload_kwargs.get("precision")
        precision = check_precision(given) if given and workload is None else None
        money, provider = _report_options(gpu_price, provider)                 # so are the report's options
        # With --json our stdout carries one JSON object: the command's own output goes to stderr.
        result = run_command(cmd, log_path=log, interval_s=interval, torch_hook=torch_hook,
                             child_stdout=sys.stderr.fileno() if json_out else None,
                             workload=workload.to_dict() if workload else None, kill_after_s=kill_after)
        report = None
        problem = "no GPU was sampled (no NVIDIA driver): no report" if result.no_driver else None
        if result.sampled and result.samples_taken:
            try:
                from gpuwise.catalog import load_catalog
                from gpuwise.report.build import build_report

                catalog = load_catalog()
                correction, _ = user_correction(not no_user_calibration, catalog)   # a damaged file: no report, the run stands
                report = build_report(result.log_path, catalog, provider=provider, gpu_price=money,
                                      workload=workload, correction=correction, precision=precision)
            except Exception as exc:  # the command's exit code matters more than our report: a warning
                problem = f"no report: {exc}"
        try:
            _print_run_result(result, report, problem, json_out)
        except Exception as exc:  # a report that cannot be shown is a warning: the exit code is the command's
            print(f"gpuwise: warning: no report: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise typer.Exit(result.exit_code)

    @app.command("exporter")
    def exporter_cmd(
        port: Annotated[int, typer.Option("--port", help="TCP port (dcgm-exporter's is 9400; 0 picks a free one).")] = 9400,
        bind: Annotated[str, typer.Option("--bind", help="Address to listen on (0.0.0.0 for every interface).")] = "127.0.0.1",
        interval: IntervalOpt = 1.0,
        log: LogOpt = None,
        read_timeout: Annotated[float, typer.Option(
            "--read-timeout", help="Seconds a client may take to send its request before it is dropped.")] = 10.0,
        json_out: JsonOpt = False,
    ) -> None:
        """Prometheus metrics of every GPU on http://BIND:PORT/metrics, named like dcgm-exporter's."""
        from gpuwise.monitor.exporter import check_serve_options, metrics_url, serve
        from gpuwise.monitor.sampler import close_sampler
        from gpuwise.monitor.stop_signals import stop_on_signals

        check_serve_options(port, read_timeout, bind)  # bad input: before the sampler and its log
        # The stop handlers first: a SIGTERM right after the "serving" line (or before it) ends the exporter
        # with its run log's end written, never with the process killed half-way.
        with stop_on_signals() as stop:
            sampler = _sampler(interval, log)
            if sampler is None:
                return
            backend = sampler.backend
            try:
                sampler.sample_once()  # the first scrape already has data
                sampler.start()
                server, _thread = serve(sampler, port, bind, read_timeout_s=read_timeout)
            except BaseException:
                close_sampler(sampler, discard_log_file=True)   # never served: no run log left behind, as run
                raise
            try:
                actual_port = server.server_address[1]
                url = metrics_url(bind, actual_port)
                if json_out:
                    print_json({"url": url, "port": actual_port, "bind": bind, "backend": backend.name})
                else:
                    print(f"gpuwise exporter: serving {url} (Ctrl-C to stop)")
                sys.stdout.flush()
                stop.wait()
            finally:
                server.shutdown()
                close_sampler(sampler)
