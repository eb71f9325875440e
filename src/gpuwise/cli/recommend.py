"""`gpuwise recommend`: the cheapest GPU (or N GPUs) that fits the job and meets the deadline or budget."""

from __future__ import annotations

import logging
from typing import Annotated, Optional

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from gpuwise.cli import common as c
from gpuwise.cli.calibrate import NoUserCalibrationOpt, user_correction
from gpuwise.cli.workload_options import workload_from, workload_options
from gpuwise.units import CNY_PER_UNIT, format_bytes, format_duration, format_money, format_request_rate
from gpuwise.text import for_console


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend)


SUMMARY_ROWS = 12      # options the table shows without --all (the marked ones among them), then one of each exclusion

# --batch-size here: the micro-batch of one GPU, and with --grad-accum the effective batch every option keeps
BATCH_SIZE_HELP = ("Micro-batch; with --grad-accum it sets the effective batch (micro-batch × accumulation) that "
                   "every option keeps and splits over its GPUs, so a multi-GPU option needs an effective batch "
                   "it divides (--effective-batch N); --per-gpu-batch runs this micro-batch on every GPU instead. "
                   "'auto' (with --effective-batch): the largest that fits each option.")


@workload_options(exclude=("num_gpus",), help={"batch_size": BATCH_SIZE_HELP})
def recommend(
    model: Annotated[str, typer.Argument(help="torchvision:NAME, timm:NAME, hf:NAME (any Hub id), hf:config.json or file.py:factory.")],
    samples: Annotated[Optional[int], typer.Option("--samples", help="Samples per epoch.")] = None,
    epochs: Annotated[float, typer.Option("--epochs", help="Epochs over --samples.")] = 1.0,
    steps: Annotated[Optional[int], typer.Option("--steps", help="Optimizer steps (instead of --samples).")] = None,
    deadline: Annotated[Optional[str], typer.Option("--deadline", help="Finish within, e.g. 12h, 90m, 2d.")] = None,
    # 300元 is read too, but not named here: a character two cells wide makes the help table cut its line short
    budget: Annotated[Optional[str], typer.Option("--budget", help="Spend at most, e.g. ¥300, 300CNY, 40USD, 5000JPY (¥ is yuan, CNY; where costs are ranked in yen it is refused as ambiguous: write CNY or JPY). A bare number (300) is in the ranking currency: --currency, else the offers' own where they share one (USD for --provider runpod), else CNY; the output says which.")] = None,
    ttft: Annotated[Optional[str], typer.Option("--ttft", help="LLM serving (--mode infer): the longest time to first token a request may wait, with a unit: 2s, 500ms (one batch: its prefill; at --request-rate: a request's prefill and its wait for it).")] = None,
    tpot: Annotated[Optional[str], typer.Option("--tpot", help="LLM serving (--mode infer, --max-new-tokens >= 1): the longest time per output token a request may see, with a unit: 50ms (= 20 tokens/s a request).")] = None,
    provider: Annotated[Optional[str], typer.Option("--provider", help="Only this provider's offers, e.g. autodl or aws (one provider; default: every provider's, ranked in one currency).")] = None,
    gpus: Annotated[Optional[str], typer.Option("--gpus", help="Only these GPUs (id, alias or NVML name), comma-separated, e.g. rtx-4090,a100-80gb-sxm4 (how many of each: --max-gpus).")] = None,
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Largest GPU count to quote: 1, 2, 4, 8 (one machine), then 16, 32 … (whole machines, at most 1024), up to N: 3 quotes 1 and 2. Past one machine only from providers that rent clusters (AWS, GCP, Aliyun); a note names the others.")] = 8,
    spot: Annotated[bool, typer.Option("--spot", help="Include spot/interruptible offers, priced with expected preemptions.")] = False,
    live: c.LiveOpt = False,
    preemptions_per_hour: c.PreemptionsPerHourOpt = None,
    checkpoint_every: c.CheckpointEveryOpt = None,
    effective_batch: Annotated[Optional[int], typer.Option("--effective-batch", help="Samples per optimizer step, kept on every option (default: batch × grad-accum).")] = None,
    per_gpu_batch: Annotated[bool, typer.Option("--per-gpu-batch", help="Run --batch-size on every GPU instead: the effective batch grows with the GPU count.")] = False,
    currency: Annotated[Optional[str], typer.Option("--currency", help=f"Rank costs in this currency ({', '.join(sorted(CNY_PER_UNIT))}). Default: the offers' own where they share one, else CNY.")] = None,
    headroom: c.HeadroomOpt = None,
    remedies: Annotated[bool, typer.Option("--remedies/--no-remedies", help="When cheap GPUs run out of memory, try changes that would make the job fit.")] = True,
    catalog: c.CatalogOpt = None,
    plot: Annotated[Optional[str], typer.Option("--plot", help="Write a PNG of cost vs time for every option (.pdf, .svg … by the suffix).")] = None,
    show_all: Annotated[bool, typer.Option("--all", help=f"Show every option, not the {SUMMARY_ROWS} best and one of each kind left out.")] = False,
    no_cache: c.NoCacheOpt = False,
    no_user_calibration: NoUserCalibrationOpt = False,
    json_out: c.JsonOpt = False,
    emit: Annotated[Optional[str], typer.Option("--emit", help="Print how to launch the best option instead of the table: skypilot (a task YAML; it uploads a wheel of this gpuwise, built into ~/.cache/gpuwise/wheels) or torchrun (per-node command lines). A plan priced on --sharding zero*/fsdp or --offload says so and writes a DeepSpeed config beside the command. A server (--engine vllm, --request-rate): skypilot gives a SkyServe service (sky serve up) running the plan's vllm serve line on each replica; torchrun is refused, naming that line.")] = None,
    command: Annotated[Optional[str], typer.Option("--command", help="With --emit: the training command to launch, e.g. 'python train.py --checkpoint-dir ckpt' (not for a server: it runs the plan's vllm serve line).")] = None,
    *,
    workload_kwargs: dict,
) -> None:
    """For every GPU and count on offer: fits?, batch, time and cost of the whole job; the best marked.

    The effective batch (samples per optimizer step) is the same on every option: each option splits
    it into micro-batch × accumulation × GPUs, so every option trains the same model (--per-gpu-batch
    opts out). Predictions assume PyTorch 2.x eager mode with cuDNN.
    """
    from gpuwise.plan import Constraints, JobSize, PlanError, model_for, parse_headroom, recommend as plan_recommend
    from gpuwise.plan.recommend import resolve_gpu_ids
    from gpuwise.plan.recommend import auto_micro_batch
    from gpuwise.plan.plot import plot_recommendation
    from gpuwise.launch import check_emit, is_server, launch_best, serve_best

    if plot:
        from gpuwise.plotfile import plot_format

        plot_format(plot)     # before the work: a path the plot cannot be written to is refused with nothing lost
    batch = c.parse_batch_size(workload_kwargs["batch_size"], allow_auto=True)
    auto = batch is None
    serving = workload_kwargs.get("mode", "train") == "infer"
    workload = workload_from(model, workload_kwargs, batch_size=batch or auto_micro_batch(
        effective_batch, serving=serving))
    server = is_server(workload)
    check_emit(emit, command, server=server)     # a server's launch is its deployment's, known once recommended
    if serving:
        for flag, given in (("--effective-batch", effective_batch is not None and not auto),
                            ("--per-gpu-batch", per_gpu_batch)):
            if given:
                logging.getLogger("gpuwise.cli").warning(
                    f"{flag} has no effect with --mode infer (no optimizer step: --batch-size is the requests "
                    "served together)")
    elif effective_batch is not None and workload.grad_accum_steps > 1 and not auto \
            and workload.batch_size * workload.grad_accum_steps != effective_batch:
        logging.getLogger("gpuwise.cli").warning(
            f"--grad-accum {workload.grad_accum_steps} has no effect with --effective-batch {effective_batch}: each "
            "option accumulates what its micro-batch and GPUs leave of the effective batch (the batch column)")
    headroom_fraction = parse_headroom(headroom)
    at_rate = workload.request_rate_per_s is not None
    if at_rate and (samples is not None or steps is not None):
        raise PlanError("--samples and --steps size a job of given requests; --request-rate sizes a load served by "
                        "the hour (give one of them)")
    per_million = not workload.is_training and samples is None and steps is None and workload.max_new_tokens > 0
    if serving and not at_rate and samples is None and steps is None and workload.max_new_tokens == 0:
        from gpuwise.workload.decoder import is_llm

        if is_llm(workload):      # JobSize's "--samples N or --steps S" says nothing of generation
            raise PlanError("give --max-new-tokens N (tokens an answer: serving is then priced per million output "
                            "tokens), or the job's size: --samples N requests (with --max-new-tokens 0, prompts "
                            "scored only)")
    job = JobSize.serving(workload.max_new_tokens) if per_million else JobSize(samples=samples, epochs=epochs,
                                                                                 steps=steps)
    c.warn_epochs_unused(samples, epochs)     # once the size is known good: a refusal comes alone
    currency = c.currency_option("--currency", currency) if currency is not None else None
    budget_amount, budget_currency = (c.money_option("--budget", budget, ranking_currency=currency)
                                      if budget is not None else (None, None))
    constraints = Constraints(
        deadline_s=_duration("--deadline", deadline, ("h", "m"), "12h, 90m, 2d"), budget=budget_amount,
        budget_currency=budget_currency, headroom_fraction=headroom_fraction,
        max_ttft_s=_duration("--ttft", ttft), max_tpot_s=_duration("--tpot", tpot),
    )
    spot_risk = c.spot_risk(preemptions_per_hour, checkpoint_every)
    cat = c.load_catalog_for(catalog, live)
    c.text_option("--gpus", gpus, names="GPU", give="names, e.g. --gpus rtx-4090,a100-80gb-sxm4", unset="every GPU")
    gpu_ids = resolve_gpu_ids(cat, [g for g in gpus.split(",") if g.strip()]) if gpus else None   # before tracing
    if budget is not None and currency is None:
        # no --currency: the offers' own currency ranks (yen where they are all in yen), and ¥ may then be either
        from gpuwise.plan.offers import candidate_offers, ranking_currency, spot_policy

        c.money_option("--budget", budget, ranking_currency=ranking_currency(
            candidate_offers(cat, provider=provider, gpu_ids=gpu_ids, spot=spot_policy(spot)), None))

    c.use_trace_cache(not no_cache)
    correction, calibrated = user_correction(not no_user_calibration, cat)
    with c.progress(not json_out, "tracing…") as progress:
        wm = model_for(workload, progress, correction=correction)
        rec = plan_recommend(
            wm, cat, job=job, constraints=constraints, provider=provider, gpu_ids=gpu_ids, max_gpus=max_gpus,
            spot=spot, spot_risk=spot_risk,
            auto_batch=auto, effective_batch=effective_batch, per_gpu_batch=per_gpu_batch,
            currency=currency, remedies=remedies, progress=progress,
        )
    from gpuwise.plan.accuracy import job_range_note, likely_job_time_range_s, load_accuracy, time_basis_lines

    from gpuwise.catalog.model import stale_price_note

    stale = stale_price_note(o.offer for o in rec.options if o.offer is not None)
    launch = (serve_best(rec, cat, emit) if server else launch_best(rec, cat, emit, command)) if emit else None
    if json_out:
        # the accuracy of the regime the best option's likely range comes from (else the first option with a
        # range); null where none has one; each option carries its own range
        covered = [o for o in ([rec.best] if rec.best else []) + list(rec.options)
                   if likely_job_time_range_s(o, rec.method)]
        accuracy = load_accuracy(covered[0].regime) if covered else None
        answer = rec.to_dict()
        # every option's range, wherever it is listed: the picks and the closest are the options again
        picked = [(rec.options, answer["options"]), (rec.closest, answer["closest"])] + [
            ((o,), (answer[key],)) for key, o in (("best", rec.best), ("fastest", rec.fastest),
                                                  ("best_value", rec.best_value)) if o is not None]
        for quotes, dicts in picked:
            for o, d in zip(quotes, dicts):
                d["likely_time_range_s"] = likely_job_time_range_s(o, rec.method)
                d["likely_range_note"] = job_range_note(o, rec.method)     # why none, where none
                d["deadline_at_risk_s"] = deadline_at_risk_s(o, rec.method, constraints.deadline_s)
        if stale:
            answer["notes"] = [*answer["notes"], stale]
        c.print_json({**answer, "user_calibration": [cal.summary for cal in calibrated],
                      "user_calibration_carried_from": _carried_from(calibrated),
                      "time_accuracy": accuracy.to_dict() if accuracy is not None else None,
                      **({"launch": launch} if launch else {})})
    elif launch:
        typer.echo(launch["text"], nl=False)
    if json_out or launch:
        if plot:      # after the answer: a plot that fails (nothing to draw, a full disk) leaves it printed
            plot_recommendation(rec, plot, constraints.deadline_s)
        return
    _render(rec, show_all, constraints.deadline_s, constraints.headroom_fraction)
    if stale:
        c.console.print(f"[yellow]note: {escape(stale)}[/]")
    if per_million and not at_rate:
        c.console.print(f"[dim]Serving priced per million output tokens: {job.samples:,} requests of "
                        f"{workload.max_new_tokens} new tokens (--samples N for a number of requests).[/]")
    for line in time_basis_lines(rec.options, rec.method):
        c.console.print(f"[dim]{escape(line)}[/]")
    for cal in calibrated:     # memory only where its runs measured it (GpuCalibration.scope)
        c.console.print(f"[dim]{escape(cal.scope.capitalize())} {escape(cal.summary)} "
                        "(--no-user-calibration: the shipped model).[/]")
    if carried := _carried_from(calibrated):
        c.console.print(f"[dim]Step times on every other GPU carry the calibration of your runs on {carried} "
                        "(memory as shipped there).[/]")
    elif len(calibrated) > 1:
        c.console.print("[dim]Step times on every other GPU carry the calibration of the closest GPU you calibrated "
                        "(same chip, then architecture, then most runs; each option's calibration in --json names it; memory "
                        "as shipped there).[/]")
    if plot:
        plot_recommendation(rec, plot, constraints.deadline_s)
        c.console.print(f"[dim]plot written to {escape(plot)}[/]")


def _carried_from(calibrated) -> str | None:
    """The GPU whose calibration every GPU without one carries: the one calibrated GPU (None: none, or several,
    where each GPU carries the closest one's: ``calibrate.apply.carried_calibration``)."""
    return calibrated[0].gpu if len(calibrated) == 1 else None


def _at(rec, o) -> str:
    """" at amp-fp16" where the option was quoted at another precision than the workload's (no bf16)."""
    precision = rec.fallback_precision.get(o.gpu)
    return f" at {precision} (no bf16)" if precision else ""


def _cost(o) -> str:
    """The job's cost in the ranking currency, so that the rows compare by eye (--json has each offer's own)."""
    return format_money(o.total_cost_ranked, o.ranking_currency) if o.total_cost_ranked is not None else "-"


def _duration(option: str, text: str | None, units: tuple[str, str] = ("ms", "s"),
              examples: str = "1s, 500ms, 25ms") -> float | None:
    """Seconds of a duration option, its name in the one-line error, which gives ``examples`` (once); a bare
    number is refused (which unit a user meant is a guess: '12' as 12 s would pass a deadline of 12 hours
    silently), so no bare number is among the examples."""
    from gpuwise.units import UnitError

    if text is None:
        return None
    if text.strip().replace(".", "", 1).isdigit() and float(text) != 0:     # 0 is refused as '0h' is
        raise UnitError(f"{option} {text}: give a unit (e.g. {option} {text}{units[0]} or {option} {text}{units[1]})")
    return c.duration_option(option, text, examples=examples)


def _render(rec, show_all: bool, deadline_s: float | None, headroom_fraction: float) -> None:
    from gpuwise.plan.accuracy import job_range_words

    con = c.console
    w = rec.workload
    optimizer = f", optimizer {w.optimizer_described()}" if w.is_training else ""
    con.print(f"[bold]{w.model}[/]  {w.mode}, {c.job_words(w)}{optimizer}"
              f"  [dim]({rec.method})[/]")
    by_precision: dict[str, list[str]] = {}
    for gpu, precision in rec.fallback_precision.items():
        by_precision.setdefault(precision, []).append(gpu)
    for precision, ids in by_precision.items():
        con.print(f"[yellow]no bf16 on {', '.join(sorted(ids))}: quoted at {precision} there, the default where "
                  f"bf16 is missing (--precision {w.precision} leaves {'it' if len(ids) == 1 else 'them'} out)[/]")
    if w.is_training and rec.options:
        con.print("[dim]batch: micro-batch per GPU × accumulation steps (effective batch = that × GPUs)[/]")
    marks = {}
    for label, o in (("value", rec.best_value), ("fastest", rec.fastest), ("BEST", rec.best)):
        if o is not None:
            marks.setdefault(id(o), []).insert(0, label)
    shown = rec.options if show_all else _summary(rec)
    table, footnotes = _options_table(shown, marks, best=rec.best, width=con.width, fallback=rec.fallback_precision,
                                      at_load=w.request_rate_per_s is not None)
    if shown:     # no offers: no table of nothing (the line below says why, and how to add a price)
        con.print(table)
    for number, reason in footnotes:
        con.print(f"[dim]{number}[/] {reason}")
    if w.request_rate_per_s is not None:
        con.print(f"[dim]{LOAD_FOOTNOTE}[/]")
    if any(o.own_price for o in shown):
        con.print(f"[dim]{OWN_PRICE_MARK}[/] your price (your catalog file); the others are shipped indicative prices")
    if len(shown) < len(rec.options):
        con.print(f"[dim]{len(rec.options) - len(shown)} more options not shown (--all shows them, --json lists them).[/]")
    if rec.best is not None and w.request_rate_per_s is not None:
        _render_load_lines(rec)
    elif rec.best is not None:
        b = rec.best
        likely = job_range_words(b, rec.method)     # how far its time may be off: its regime's range, or why none
        con.print(f"[bold green]Best:[/] {_gpus(b)} from {_seller(b.provider, b.spot)}{_at(rec, b)}: "
                  f"{format_duration(b.total_time_s)} "
                  f"({format_duration(b.step_time_s)} a step{_preempted(b)}{'; ' + likely if likely else ''}), "
                  f"{_cost(b)} ("
                  + (f"micro-batch {b.batch_size}, {b.grad_accum_steps} accumulation step(s), " if w.is_training
                     else f"{b.batch_size} requests at a time, ")
                  + f"needs {format_bytes(b.peak_total_bytes)} of "
                    f"{_judged_against(rec, b.gpu_memory_bytes, headroom_fraction)})")
        if b.ttft_s is not None and b.tpot_s is not None:
            con.print(f"  each request: first token after {format_duration(b.ttft_s)} (the batch's prefill), then "
                      f"{format_duration(b.tpot_s)} a token ({1 / b.tpot_s:,.0f} tokens/s)")
        elif b.ttft_s is not None and not w.is_training and w.max_new_tokens == 0:
            con.print(f"  prefill only (--max-new-tokens 0: prompts scored, nothing generated): each batch "
                      f"{format_duration(b.ttft_s)}")
        _also(rec, "least cost × time")
        _risks(b, deadline_s, rec.method)
        _fastest_and_value(rec, "least cost × time",
                           lambda o: f"{_gpus(o)} from {_seller(o.provider, o.spot)}{_at(rec, o)}: "
                                     f"{format_duration(o.total_time_s)}, {_cost(o)}",
                           lambda o: o.total_time_s)
    else:
        con.print(f"[bold yellow]{escape(rec.nothing_meets)}[/]")
        for o in rec.closest:
            con.print(f"  closest: {_deployment(o)} ({_seller(o.provider, o.spot)}){_at(rec, o)}: "
                      + (f"{_cost(o)} an hour" if o.replicas else f"{format_duration(o.total_time_s)}, {_cost(o)}")
                      + f" — {o.excluded_because}")
    # with no best there is nothing to be cheaper than: the change makes the job fit at all
    lead = "To fit a cheaper GPU" if rec.best is not None else "To make the job fit"
    for r in rec.remedies:
        ram = f" and {format_bytes(r['cpu_offload_bytes'])} of host RAM" if r.get("cpu_offload_bytes") else ""
        gpus = f"{r['count']}× {r['gpu_name']}" if r.get("count", 1) > 1 else r["gpu_name"]
        each = " each" if r.get("count", 1) > 1 else ""
        con.print(f"[cyan]{lead}:[/] {r['change']} → {gpus} needs {format_bytes(r['peak_total_bytes'])}{each} of "
                  f"{_judged_against(rec, r['gpu_memory_bytes'], headroom_fraction)}{ram}, "
                  f"{format_duration(r['total_time_s'])}, {format_money(r['total_cost_ranked'], r['ranking_currency'])} "
                  f"({_seller(r['provider'], r.get('spot', False))})"
                  + (f" ({r['why_faster']})" if r.get("why_faster") else "")
                  + (f"; {r['batch_note']}" if r.get("batch_note") else ""))
    for note in rec.notes:
        con.print(f"[dim]note: {note}[/]")


def _judged_against(rec, gpu_memory_bytes: int, headroom_fraction: float) -> str:
    """The memory a need was judged against, as estimate's fit line says it: the GPU's usable memory (less
    --headroom); served by vLLM, the whole GPU (vLLM's own reservation decides the fit, not the headroom)."""
    if rec.workload.engine == "vllm" and not rec.workload.is_training:
        return format_bytes(gpu_memory_bytes)
    return c.usable_words(gpu_memory_bytes, headroom_fraction)


def _seller(provider: str | None, spot: bool) -> str:
    """'runpod (spot)' for a spot offer, as the table's provider column says, so a named pick is never read as the
    same seller's on-demand offer; 'runpod' otherwise."""
    return f"{provider or '-'}{' (spot)' if spot else ''}"


def _preempted(o) -> str:
    """'; 1.2 min of it expected preemptions' where a spot option's job time includes them (steps × step time is
    the rest)."""
    return f"; {format_duration(o.preemption_time_s)} of it expected preemptions" if o.preemption_time_s else ""


def _gpus(o) -> str:
    """'16× NVIDIA H100 80GB SXM5 (2 machines of 8)'; '2× NVIDIA H100 80GB SXM5' on one machine."""
    return f"{o.count}× {o.gpu_name}" + (f" ({o.nodes} machines of {o.gpus_per_node})" if o.nodes > 1 else "")


def _deployment(o) -> str:
    """'2 replicas of 2× NVIDIA H100 (tensor parallel 2)' at a load; '2× NVIDIA H100' otherwise."""
    gpus = _gpus(o) + (f" (tensor parallel {o.count})" if o.count > 1 and o.replicas else "")
    if not o.replicas:
        return gpus
    return f"{o.replicas} replica{'s' if o.replicas > 1 else ''} of {gpus}"


def _per_million(o) -> str:
    value = o.cost_per_million_tokens_ranked
    return format_money(value, o.ranking_currency) if value is not None else "-"


def _render_load_lines(rec) -> None:
    """The best option at ``--request-rate``: the deployment, its cost by the hour and by the token, what a
    request sees and how loaded each replica is; then the fastest and the best value."""
    con, w, b = c.console, rec.workload, rec.best
    con.print(f"[bold green]Best:[/] {_deployment(b)} from {_seller(b.provider, b.spot)}{_at(rec, b)}: "
              f"{_cost(b)} an hour at "
              f"{format_request_rate(w.request_rate_per_s)}, {_per_million(b)} per million output tokens")
    con.print(f"  each request: first token after {format_duration(b.ttft_s)} (its prefill and the wait for it), "
              f"then {format_duration(b.tpot_s)} a token ({1 / b.tpot_s:,.0f} tokens/s)")
    con.print(f"  {b.concurrency:,.1f} requests in flight; each replica carries up to "
              f"{format_request_rate(b.capacity_per_replica_per_s)}, so it runs at {b.load:.0%} load")
    _warnings(b)
    _also(rec, "least cost × request time")
    _fastest_and_value(rec, "least cost × request time",
                       lambda o: f"{_deployment(o)} from {_seller(o.provider, o.spot)}{_at(rec, o)}: "
                                 "a request answered in "
                                 f"{format_duration(o.ttft_s + w.max_new_tokens * o.tpot_s)}, {_cost(o)} an hour",
                       lambda o: o.ttft_s + w.max_new_tokens * o.tpot_s
                       if o.ttft_s is not None and o.tpot_s is not None else None)


def _also(rec, value_measure: str) -> None:
    """What else the best option is: the fastest, the best value (by ``value_measure``)."""
    also = [name for name, o in (("the fastest", rec.fastest), (f"the best value ({value_measure})",
                                                                rec.best_value)) if o is rec.best]
    if also:
        c.console.print(f"  also {' and '.join(also)}")


def _fastest_and_value(rec, value_measure: str, describe, time_of) -> None:
    """The fastest and the best-value options where they are not the best (one line each, or one for both);
    ``describe(option)`` says what the option is and what it gives, ``time_of(option)`` what "fastest" ranks by.
    A fastest option a constraint leaves out (the budget) says so, and the fastest that meets them follows."""
    b, f, v = rec.best, rec.fastest, rec.best_value
    if f is not None and not f.eligible:
        c.console.print(f"Fastest: {describe(f)} [yellow](left out: {f.excluded_because})[/]")
        _warnings(f)
        within = _limits(f)
        f = _fastest_met(rec, time_of)
        if f is b:
            c.console.print(f"  the fastest within {within} is the best above")
        elif f is not None:
            value = f" and best value ({value_measure})" if v is f else ""
            c.console.print(f"Fastest within {within}{value}: {describe(f)}")
            _warnings(f)
    elif f is not None and f is not b:
        value = f" and best value ({value_measure})" if v is f else ""
        c.console.print(f"Fastest{value}: {describe(f)}")
        _warnings(f)
    if v is not None and v is not b and v is not f:
        c.console.print(f"Value ({value_measure}): {describe(v)}")
        _warnings(v)


def _fastest_met(rec, time_of=None):
    """The fastest of the options that meet every constraint (``rec.fastest`` may be one a constraint left
    out); ``time_of``: what "fastest" ranks by (default: the job's time; at a load, a request's answer)."""
    if time_of is None:
        new_tokens = rec.workload.max_new_tokens
        time_of = ((lambda o: o.ttft_s + new_tokens * o.tpot_s if o.ttft_s is not None and o.tpot_s is not None
                    else None) if rec.workload.request_rate_per_s is not None else (lambda o: o.total_time_s))
    met = [o for o in rec.options if o.eligible and time_of(o) is not None]
    return min(met, key=lambda o: (time_of(o), o.total_cost_ranked), default=None)


def _limits(left_out) -> str:
    """ "budget" where the fastest option was left out by --budget, for "Fastest within …"."""
    from gpuwise.plan.reasons import BUDGET

    return "budget" if left_out.exclusion.kinds == (BUDGET,) else "the constraints"


def deadline_at_risk_s(option, method: str, deadline_s: float | None) -> float | None:
    """The job's time at the slow end of its likely range (plan/accuracy.py) where the prediction meets
    ``deadline_s`` and that slow end does not: the "at risk" line, and each option's ``deadline_at_risk_s`` in
    --json. None: no deadline, no likely range, the slow end within it, or the deadline missed outright (the
    option is left out for it)."""
    from gpuwise.plan.accuracy import likely_job_time_range_s

    if deadline_s is None or option.total_time_s is None or option.total_time_s > deadline_s:
        return None
    likely = likely_job_time_range_s(option, method)
    return likely[1] if likely and likely[1] > deadline_s else None


def _risks(best, deadline_s: float | None, method: str) -> None:
    """What the table cannot show about the pick: its warnings (real JPEGs needing more CPU cores than the
    GPU comes with, in full), and a deadline met by the prediction but not at the slow end of its likely
    range (``deadline_at_risk_s``)."""
    _warnings(best, full_decoding=True)
    slow = deadline_at_risk_s(best, method, deadline_s)
    if slow is not None:
        c.console.print(f"  [yellow]at risk:[/] at the slow end of the likely range "
                        f"({slow / best.total_time_s:.2f}x the prediction) it would take {format_duration(slow)}, "
                        f"past the {format_duration(deadline_s)} deadline")


def _warnings(pick, *, full_decoding: bool = False) -> None:
    """A named pick's warnings under its line, each brief (``brief_warning``; --json has them whole): the
    best's, the fastest's and the best value's alike. Left out: what the output says already (the batch
    column's split, the no-bf16 line's precision). ``full_decoding``: the decoding-cores warning in full."""
    from gpuwise.runtime.input_pipeline import is_decoding_warning
    from gpuwise.runtime.model import Note, is_note

    for warning in pick.warnings:
        if is_note(warning, Note.BATCH_SPLIT) or is_note(warning, Note.PRECISION_FALLBACK):
            continue
        text = warning if full_decoding and is_decoding_warning(warning) else brief_warning(warning)
        c.console.print(f"  [yellow]warning:[/] {escape(text)}")


def brief_warning(warning: str) -> str:
    """A warning's first clause (up to its first "; ", where the advice starts) without its parentheses."""
    import re

    return re.sub(r" \([^()]*\)", "", str(warning).split("; ", 1)[0])


_COLUMNS = ("", "gpu", "provider", "batch", "needs", "job time", "job cost")
# at --request-rate: replicas, the load (rate / capacity), what a request sees, cost at the load (the requests in
# flight and the cost per million output tokens, the same order at one rate, are in the lines below and --json)
_LOAD_COLUMNS = ("", "gpu", "provider", "repl.", "load", "ttft", "tpot", "cost/h")
LOAD_FOOTNOTE = ("load: the rate each replica carries as a share of the most it can carry (100%: saturated); "
                 "the share of time its GPUs are busy is --json's utilisation")
_LEFT = ("", "gpu", "provider")
OWN_PRICE_MARK = "*"     # after the provider: priced by the user's own offer
_WHY = "bound / why not"
_WHY_MIN_WIDTH = 24   # narrower than this, a long reason becomes a footnote under the table, not a tall cell
_WHY_NARROWEST = 9    # "compute", "bandwidth", "see [9]"


def _options_table(shown, marks: dict, *, best, width: int,
                   fallback: dict[str, str] | None = None, at_load: bool = False) -> tuple[Table, list[tuple[str, str]]]:
    """The options table, laid out for ``width`` columns, and the numbered footnotes it refers to.

    Nothing is cut or left out silently. The table first tries two-space gaps, then one-space gaps
    with one mark a row; where the reasons then have less than ``_WHY_MIN_WIDTH`` columns, each
    one that does not fit moves under the table as a footnote, its number in the row. Where even
    that is too wide (a very narrow terminal), cells wrap: a value may take two lines, never "…".
    ``fallback``: GPU id -> the precision its options were quoted at, said first in their reasons.
    ``at_load``: the columns of a recommendation at ``--request-rate`` (replicas, loaded latencies, cost per hour).
    """
    from gpuwise.runtime.model import bound_word

    fallback = fallback or {}
    reasons = [(f"at {fallback[o.gpu]}: " if o.gpu in fallback else "") + (o.excluded_because or bound_word(o.bound))
               for o in shown]
    columns = _LOAD_COLUMNS if at_load else _COLUMNS
    cells = _load_row_cells if at_load else _row_cells
    for compact in (False, True):
        rows = [cells(o, marks, one_mark=compact) for o in shown]
        room = width - c.natural_width(_table(rows, None, compact=compact, columns=columns)) - (1 if compact else 3)
        if room >= max(min(_WHY_MIN_WIDTH, max(map(len, reasons), default=0)), _WHY_NARROWEST):
            break
    footnotes: list[tuple[str, str]] = []
    if room < _WHY_MIN_WIDTH and any(len(r) > room for r in reasons):
        numbered: dict[str, str] = {}
        for i, reason in enumerate(reasons):
            if len(reason) > max(room, _WHY_NARROWEST):
                if reason not in numbered:
                    numbered[reason] = f"[{len(numbered) + 1}]"
                    footnotes.append((numbered[reason], reason))
                reasons[i] = f"see {numbered[reason]}"
    styles = ["bold green" if o is best else ("dim" if not o.eligible else "") for o in shown]
    return c.fit_to_console(_table(rows, reasons, styles, compact=compact, columns=columns)), footnotes


def _table(rows: list[list[str]], reasons: list[str] | None, styles: list[str] | None = None, *,
           compact: bool = False, columns: tuple[str, ...] = _COLUMNS) -> Table:
    # compact: one space between columns, no edges, and the reasons' header on two lines.
    table = Table(pad_edge=False, box=box.SIMPLE_HEAD, show_edge=not compact, padding=(0, 0 if compact else 1))
    for col in (*columns, *((_WHY,) if reasons is not None else ())):
        # Only the reasons wrap while the table fits; c.fit_to_console lets the rest wrap when it does not.
        header = col.replace(" / ", " /\n") if compact else col
        table.add_column(header, justify="left" if col in (*_LEFT, _WHY) else "right",
                         overflow="fold", no_wrap=col != _WHY)
    for i, cells in enumerate(rows):
        table.add_row(*cells, *((reasons[i],) if reasons is not None else ()), style=(styles or [""] * len(rows))[i])
    return table


def _row_cells(o, marks: dict, *, one_mark: bool = False) -> list[str]:
    batch = f"{o.batch_size}×{o.grad_accum_steps}" if o.batch_size and o.grad_accum_steps > 1 else str(o.batch_size or "-")
    return [
        # narrow: the strongest mark only (a stack of marks read as empty rows); the lines below say the rest
        (marks.get(id(o), [""])[0] if one_mark else "+".join(marks.get(id(o), []))),
        for_console(o.gpu) + (f" ×{o.count}" if o.count > 1 else ""),
        for_console(_seller(o.provider, o.spot)) + (OWN_PRICE_MARK if o.own_price else ""), batch,
        format_bytes(o.peak_total_bytes) if o.peak_total_bytes else "-",
        # an option that does not fit in memory has no job to time or price (--json keeps the figures)
        format_duration(o.total_time_s) if o.total_time_s and o.fits else "-", _cost(o) if o.fits else "-",
    ]


def _load_row_cells(o, marks: dict, *, one_mark: bool = False) -> list[str]:
    """A row at --request-rate: the deployment that carries the load, what a request sees, the cost at it."""
    served = o.replicas is not None     # a deployment carries the load (it may miss a target or the budget)
    return [
        (marks.get(id(o), [""])[0] if one_mark else "+".join(marks.get(id(o), []))),
        for_console(o.gpu) + (f" ×{o.count}" if o.count > 1 else ""),
        for_console(_seller(o.provider, o.spot)) + (OWN_PRICE_MARK if o.own_price else ""),
        str(o.replicas) if served else "-",
        f"{o.load:.0%}" if o.load is not None else "-",
        format_duration(o.ttft_s) if served and o.ttft_s else "-",
        format_duration(o.tpot_s) if served and o.tpot_s else "-",
        _cost(o) if served else "-",
    ]


def _summary(rec, limit: int = SUMMARY_ROWS):
    """The marked options, then the rest by rank, then one example of each kind of exclusion."""
    keep = []
    # the fastest within the constraints is named under the table where a constraint left the fastest out
    fastest_met = _fastest_met(rec) if rec.fastest is not None and not rec.fastest.eligible else None
    for o in (rec.best, rec.fastest, rec.best_value, fastest_met):
        if o is not None and all(o is not k for k in keep):
            keep.append(o)
    for o in rec.options:
        if len(keep) >= limit:
            break
        if o.eligible and all(o is not k for k in keep):
            keep.append(o)
    seen_kinds = set()
    for o in rec.options:
        if not o.eligible and len(keep) < limit + 6 and all(o is not k for k in keep):
            kind = o.exclusion.kind      # (the fastest may be left out by the budget: listed once)
            if kind not in seen_kinds:
                seen_kinds.add(kind)
                keep.append(o)
    order = {id(o): i for i, o in enumerate(rec.options)}
    return sorted(keep, key=lambda o: order[id(o)])
