"""`gpuwise estimate`: peak memory (and, with --gpu, step time) of one step of a job."""

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
from gpuwise.units import format_bytes, format_duration, format_request_rate, format_samples_rate
from gpuwise.text import for_console


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate)


@workload_options()
def estimate(
    model: Annotated[str, typer.Argument(help="torchvision:NAME, timm:NAME, hf:NAME (any Hub id), hf:config.json or file.py:factory.")],
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="A catalog GPU (name, alias or NVML name), or 'all'.")] = None,
    max_batch: Annotated[bool, typer.Option("--max-batch", help="The largest batch that fits --gpu.")] = False,
    samples: Annotated[Optional[int], typer.Option("--samples", help="Samples per epoch, for epoch/job time.")] = None,
    epochs: Annotated[float, typer.Option("--epochs", help="Epochs, with --samples.")] = 1.0,
    steps: Annotated[Optional[int], typer.Option("--steps", help="Optimizer steps of the job.")] = None,
    headroom: c.HeadroomOpt = None,
    provider: c.WhereProviderOpt = None,
    catalog: c.CatalogOpt = None,
    plot: Annotated[Optional[str], typer.Option("--plot", help="Write a PNG of memory over the traced step (.pdf, .svg … by the suffix; not for a decoder LLM: its closed form has no timeline).")] = None,
    no_cache: c.NoCacheOpt = False,
    no_user_calibration: NoUserCalibrationOpt = False,
    json_out: c.JsonOpt = False,
    *,
    workload_kwargs: dict,
) -> None:
    """Peak GPU memory of one real step of the job, traced on this CPU; with --gpu, fit and step time.

    Memory: what torch.cuda.max_memory_allocated/reserved would report, plus the CUDA context: the
    number nvidia-smi shows. It fits when that is within the GPU's memory as the driver reports it,
    less --headroom. With --num-gpus N and --provider, the GPUs are linked as that provider's machines
    are. Predictions assume PyTorch 2.x eager mode with cuDNN.
    """
    from gpuwise.catalog import load_catalog, resolve_gpu

    c.text_option("--gpu", gpu, names="GPU", give="a GPU's name or 'all'", unset="memory alone")
    c.warn_epochs_unused(samples, epochs)
    cat = load_catalog(catalog)
    gpus = list(cat.gpus) if gpu and gpu.lower() == "all" else ([resolve_gpu(cat, gpu)] if gpu else [])
    if max_batch and len(gpus) != 1:
        raise c.WorkloadError("--max-batch needs one --gpu NAME")
    workload = workload_from(model, workload_kwargs, gpu=gpus[0] if len(gpus) == 1 else None)
    gpus = _whole_gpus_for(gpus, workload.num_gpus, every_gpu=len(gpus) > 1)
    batch_defaulted = c.option_defaulted("batch_size")    # said in the header, as the precision's default is
    if plot:
        _check_plot(plot, workload)       # before the trace: a bad path is refused with nothing lost
    if max_batch and workload.request_rate_per_s is not None:
        raise c.WorkloadError("--max-batch searches one batch; at --request-rate the batch is what the load makes it "
                              "(the answer says how many sequences a replica runs)")

    from gpuwise.plan import JobSize, model_for, parse_headroom   # the planner, once the input is known good
    from gpuwise.plan.answer import estimate_answer, largest_batch_answer
    from gpuwise.plan.offers import check_provider

    provider = check_provider(cat, provider)
    if provider and (not gpus or workload.num_gpus == 1):
        logging.getLogger("gpuwise.cli").warning(
            f"--provider {provider} changes nothing here: it sets how --num-gpus N GPUs (N > 1) on a --gpu are linked")
    headroom_fraction = parse_headroom(headroom)
    job = (JobSize(samples=samples, epochs=epochs, steps=steps)       # 0 given is refused by JobSize, not dropped
           if samples is not None or steps is not None else None)

    c.use_trace_cache(not no_cache)
    correction, _ = user_correction(not no_user_calibration, cat)
    with c.progress(not json_out, "tracing…") as progress:
        wm = model_for(workload, progress, correction=correction)    # a rate on a traced model: refused here
        if workload.request_rate_per_s is not None and len(gpus) != 1:
            raise c.WorkloadError("--request-rate sizes the deployment on one GPU: give --gpu NAME (gpuwise recommend "
                                  "… --request-rate compares every GPU at that load)")
        if max_batch:
            out, est = largest_batch_answer(wm, gpus[0], headroom_fraction=headroom_fraction, job=job,
                                            progress=progress, provider=provider)
        else:
            out, est = estimate_answer(wm, gpus, headroom_fraction=headroom_fraction, job=job, progress=progress,
                                       provider=provider)
    out["calibrated_gpus"] = calibrated_gpus(out)
    if out.get("time") and len(gpus) == 1 and workload.num_gpus > 1:
        why = _count_warning(cat, gpus[0], workload.num_gpus, provider)
        if why:
            out["time"]["warnings"] = [*out["time"]["warnings"], why]
    if json_out:
        c.print_json(out)
    else:
        _render(out, est, batch_defaulted=batch_defaulted)
    if plot:      # after the answer: a plot that fails still leaves it on the screen
        from gpuwise.memory.plot import plot_timeline

        plot_timeline(est, plot)
        if not json_out:
            c.console.print(f"[dim]plot written to {escape(plot)}[/]")


def _count_warning(cat, gpu, count: int, provider: str | None) -> str | None:
    """What is said of ``count`` GPUs that are timed but cannot be had as timed: not whole machines (launch's rule,
    said here too), or, at ``provider``, a count none of its offers rents (recommend's offer rule); None: they can."""
    from gpuwise.catalog.topology import topology_for
    from gpuwise.launch.plan import node_layout_refusal
    from gpuwise.plan.answer import unrented_count_note
    from gpuwise.plan.offers import candidate_offers

    why = node_layout_refusal(count, topology_for(gpu, provider))
    if why:
        return f"gpuwise does not launch this: {why}"
    if provider is None:
        return None
    return unrented_count_note(candidate_offers(cat, provider=provider, gpu_ids=[gpu.id], spot="include"), gpu, count,
                               provider)


def _whole_gpus_for(gpus: list, count: int, *, every_gpu: bool) -> list:
    """The GPUs a job on ``count`` of each can be estimated on: a MIG slice asked for is refused (one line,
    ``mig_count_refusal``); with ``--gpu all`` the catalog's slices are left out, said once on stderr."""
    from gpuwise.catalog.resolve import mig_count_refusal

    refused = [g for g in gpus if mig_count_refusal(g, count)]
    if refused and not every_gpu:
        raise c.WorkloadError(mig_count_refusal(refused[0], count))
    if refused:
        logging.getLogger("gpuwise.cli").warning(
            f"{len(refused)} MIG slice{'s' if len(refused) > 1 else ''} left out ({', '.join(g.id for g in refused)}): "
            f"a job does not span slices, so not {count} of them")
    return [g for g in gpus if g not in refused]


def calibrated_gpus(out: dict) -> list[str]:
    """The GPUs whose figures in the answer are calibrated by the user's runs on them (`gpuwise calibrate`): the
    one GPU's, or, with --gpu all, each row's with a calibration of its own (not one carried from another GPU).
    The JSON's ``calibrated_gpus``."""
    def own(d: dict) -> bool:
        return bool(d.get("calibration")) and not d.get("calibration_carried_from")

    if out.get("per_gpu"):
        return [row["gpu"] for row in out["per_gpu"] if own(row)]
    return [out["gpu"]] if out.get("gpu") and own(out) else []


CALIBRATED_MARK = "*"     # after a calibrated GPU's id in the --gpu all table; the footnote says with what
CARRIED_MARK = "+"        # after the id of a GPU that carries another GPU's calibration; one footnote for them all


def _check_plot(path: str, workload) -> None:
    """--plot refused up front: a path it cannot be written to, or a closed-form LLM (no memory timeline)."""
    from gpuwise.memory.plot import no_timeline
    from gpuwise.plan.generation import generates
    from gpuwise.plotfile import PlotError, plot_format
    from gpuwise.workload.decoder import is_llm

    plot_format(path)
    if is_llm(workload):      # plan.profile.model_for's rule: the closed form, no replayed step
        raise PlotError(no_timeline(workload.model))
    if generates(workload):   # the timeline is the prompts' forward; the KV cache grows after it
        raise PlotError(f"--plot draws memory over one traced step: generating {workload.max_new_tokens} tokens adds "
                        "the KV cache after it, which the timeline does not hold; drop --max-new-tokens to plot the "
                        "prefill (no file written)")


def _render(out: dict, est, *, batch_defaulted: bool = False) -> None:
    con = c.console
    w = est.workload
    optimizer = f", optimizer {w.optimizer_described()}" if w.is_training else ""
    searched = "requested_batch_size" in out      # --max-batch (largest_batch_answer)
    if searched and out["max_batch_size"]:
        # --max-batch answers its own question first; what follows is that batch's step
        asked = "" if batch_defaulted else f" (asked: {out['requested_batch_size']})"   # no --batch-size: none asked
        con.print(f"Largest batch that fits {out['gpu']}{' in memory' if out.get('cannot_run') else ''}: "
                  f"[bold]{out['max_batch_size']}[/]{asked}")
    elif searched and out["max_batch_size"] == 0:
        con.print(f"[red]Not even batch 1 fits {out['gpu']}[/]: the changes below would make batch "
                  f"{out['requested_batch_size']} fit")
    size = (format_request_rate(w.request_rate_per_s) if w.request_rate_per_s is not None and out["gpu"]
            else c.batch_words(w, defaulted=batch_defaulted and not searched))
    con.print(f"[bold]{w.model}[/]  {w.mode}, {size}, {c.job_words(w)}{optimizer}"
              f"  [dim]({out['method']})[/]")
    if out.get("calibration"):
        con.print(f"[cyan]{out['calibration']}[/] (gpuwise calibrate; --no-user-calibration for the shipped model)")
    mem = out["memory"]
    table = Table(title="Peak memory of one step" + (f" on {out['gpu']}" if out["gpu"] else ""), title_justify="left")
    table.add_column("part")
    table.add_column("bytes", justify="right")
    for key in ("weights", "gradients", "optimizer", "activations", "workspace", "other"):
        # what the workspace holds at the peak (memory's label: an optimizer step's temporaries, say)
        label = mem.get("workspace_label", key) if key == "workspace" else key
        table.add_row(escape(label), format_bytes(mem[f"{key}_bytes"]))
    table.add_row("[bold]peak allocated[/]", f"[bold]{format_bytes(mem['peak_allocated_bytes'])}[/]")
    table.add_row("peak reserved (allocator cache)", format_bytes(mem["peak_reserved_bytes"]))
    table.add_row("CUDA context", format_bytes(mem["cuda_context_bytes"]))
    for label, value in _total_rows(mem, out["inference"]):
        table.add_row(label, value)
    con.print(table)
    if mem["top_modules"]:
        con.print("Top modules by activation memory: " + ", ".join(
            f"{m['module'] or '(top)'} {format_bytes(m['bytes'])}" for m in mem["top_modules"][:5]))
    where = f" at {out['provider']}" if out.get("provider") else ""
    if out.get("cannot_run"):
        # `fits` is memory only: here the memory is a side note to why the job cannot run at all
        con.print(f"On {out['gpu']}{where}: [red]cannot run: {out['cannot_run']}[/]")
        con.print(f"  in memory alone: {out['fit_summary']}")
    elif out["gpu"]:
        colour = "green" if out["fits"] else ("yellow" if _tight(out) else "red")
        con.print(f"On {out['gpu']}{where}: [{colour}]{out['fit_summary']}[/]")
        if not out["fits"]:
            for ch in out["changes_that_fit"]:
                step = f", step {format_duration(ch['step_time_s'])}" if ch.get("step_time_s") else ""
                ram = (f" and {format_bytes(ch['cpu_offload_bytes'])} of host RAM" if ch.get("cpu_offload_bytes")
                       else "")
                con.print(f"  [cyan]fits with[/] {ch['change']}: needs {format_bytes(ch['peak_total_bytes'])}{ram}"
                          f"{step}" + (f" ({ch['why_faster']})" if ch.get("why_faster") else "")
                          + (f"; {ch['batch_note']}" if ch.get("batch_note") else ""))
            if not out["changes_that_fit"]:
                from gpuwise.plan.remedies import no_change_fits_advice

                con.print(f"  none of the changes tried makes it fit this GPU (alone or together): "
                          f"{escape(no_change_fits_advice(est.workload, mem))}")
    t = out["time"]
    if t and _out_of_memory(out):
        # the JSON keeps the step as if the memory were there; as text it would read as the job's own time
        gpus = f"{w.num_gpus}× {out['gpu']}" if w.num_gpus > 1 else out["gpu"]
        con.print(out_of_memory_time_line(gpus + where, bool(out["changes_that_fit"])))
        for warning in t["warnings"]:
            con.print(f"  [yellow]warning:[/] {warning}")
    elif t:
        from gpuwise.runtime.model import SHARDING_OVERHEAD_PART, bound_word

        con.print(_serving_time_line(t, out["inference"], w) if out["inference"] else
                  f"Step time {format_duration(t['step_time_s'])}, {format_samples_rate(t['samples_per_s'])} samples/s, "
                  f"bound by {bound_word(t['bound'])}")
        acc = out.get("time_accuracy")
        if t.get("likely_step_time_range_s") and acc:
            lo, hi = t["likely_step_time_range_s"]
            # the shipped model's error on runs it was never fitted on (runtime/accuracy.py)
            con.print(f"  likely {format_duration(lo)} to {format_duration(hi)} (8 in 10 held-out public runs; "
                      f"median error {acc['median_abs_error']:.0%})")
        elif t.get("likely_range_note"):
            con.print(f"  no measured range: {t['likely_range_note']}")
        parts = sorted(t["by_class_s"].items(), key=lambda kv: -kv[1])
        if t.get("communication_s"):
            parts.append(("communication (exposed)", t["communication_s"]))
        if t.get("sharding_overhead_s"):
            parts.append((SHARDING_OVERHEAD_PART, t["sharding_overhead_s"]))
        con.print("  by operator class: " + ", ".join(f"{k} {format_duration(v)}" for k, v in parts if v > 0))
        if t.get("total_time_s"):
            epoch = f"epoch {format_duration(t['epoch_time_s'])}, " if t.get("epoch_time_s") else ""
            likely = ""
            if t.get("likely_step_time_range_s"):
                scale = t["total_time_s"] / t["step_time_s"]
                lo, hi = (x * scale for x in t["likely_step_time_range_s"])
                likely = f", likely {format_duration(lo)} to {format_duration(hi)}"
            con.print(f"  {epoch}job {format_duration(t['total_time_s'])} ({t['optimizer_steps']} steps{likely})")
        for warning in t["warnings"]:
            con.print(f"  [yellow]warning:[/] {warning}")
    if out["inference"]:
        _render_inference(out["inference"], runs=not _out_of_memory(out))
    if out["per_gpu"]:
        from gpuwise.runtime.model import bound_word

        # the gpus table's style: no side edges, so that every id stays whole at 80 columns
        grid = Table(title="Every GPU in the catalog", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                     show_edge=False,  # no edge columns: the bound column says "bandwidth" and stays in 80
                     collapse_padding=True)
        # a serving step is a batch of requests (_serving_time_line), a training or forward step one of samples
        for col in ("gpu", "memory", "needs", "fits", "step", "requests/s" if out["inference"] else "samples/s",
                    "bound"):
            grid.add_column(col, justify="left" if col in ("gpu", "bound") else "right", no_wrap=col == "gpu")
        # a GPU the job cannot run on says why in its fits column ("no bf16"), below those it can run on
        for row in sorted(out["per_gpu"],
                          key=lambda r: (bool(r["cannot_run"]), not r["fits"], r["step_time_s"] or 1e18)):
            mark = (f" {CARRIED_MARK}" if row.get("calibration_carried_from") else
                    f" {CALIBRATED_MARK}" if row.get("calibration") else "")
            grid.add_row(for_console(row["gpu"]) + mark, format_bytes(row["memory_bytes"]),
                         format_bytes(row["peak_total_bytes"]),
                         f"[red]{_why_not_short(row['cannot_run'])}[/]" if row["cannot_run"] else
                         "yes" if row["fits"] else "[red]no[/]",
                         format_duration(row["step_time_s"]) if row["step_time_s"] else "-",
                         format_samples_rate(row["samples_per_s"]) if row["samples_per_s"] else "-",
                         bound_word(row["bound"]) or "-")
        con.print(c.fit_to_console(grid))
        con.print()       # the line the box's edge gave: the table apart from the notes
        for row in out["per_gpu"]:
            if row.get("calibration") and not row.get("calibration_carried_from"):
                con.print(f"[cyan]{CALIBRATED_MARK} {escape(row['calibration'])}[/] (gpuwise calibrate; "
                          "--no-user-calibration for the shipped model)")
        carried_from = sorted({r["calibration_carried_from"] for r in out["per_gpu"] if r.get("calibration_carried_from")})
        if carried_from:
            con.print(f"[cyan]{CARRIED_MARK} none of your runs measured these GPUs: their step times carry the "
                      f"calibration of your runs on {', '.join(carried_from)} (memory as shipped)[/]")
        twins = {r["gpu"]: r["precision"] for r in out["per_gpu"] if r["precision"] != w.precision}
        if twins:
            con.print(f"[yellow]no bf16 on {', '.join(sorted(twins))}: at {next(iter(twins.values()))} there, the "
                      f"default where bf16 is missing (--precision {w.precision} refuses them)[/]")
        _say_decoding_cores(out["per_gpu"])
    notes = (out["trace"] or {}).get("notes", []) + list(mem.get("notes", []))
    if out["per_gpu"]:
        from gpuwise.memory.estimate import NO_GPU_NOTE

        # --gpu all: the GPUs were given, each row its own; only the breakdown above assumed one
        notes = ["the breakdown above assumes an A100's CUDA context and kernels; each row's 'needs' is for its "
                 "own GPU" if n == NO_GPU_NOTE else n for n in notes]
    for note in notes:
        con.print(f"[dim]note: {note}[/]")
    from gpuwise.workload.specs import feeds_images

    vision = feeds_images(est.workload)
    layout = ", channels-first unless --channels-last" if vision else ""
    from gpuwise.runtime.stack import assumed_stack
    from gpuwise.workload.decoder import is_llm

    con.print(f"[dim]Assumes {assumed_stack(est.workload, closed_form_llm=is_llm(est.workload))}{layout}.[/]")


def _say_decoding_cores(rows: list[dict]) -> None:
    """The table has no room for warnings: the one a renter must not miss (real JPEGs need more CPU cores than the
    GPU comes with) is said once, for the fastest GPU that needs it."""
    from gpuwise.runtime.input_pipeline import is_decoding_warning

    needing = [r for r in rows if r["fits"] and any(is_decoding_warning(w) for w in r.get("warnings", ()))]
    if needing:
        top = max(needing, key=lambda r: r["samples_per_s"] or 0)
        warning = next(w for w in top["warnings"] if is_decoding_warning(w))
        c.console.print(f"[yellow]warning:[/] on {len(needing)} of these GPUs, e.g. {top['gpu']}: {warning}")


def _why_not_short(reason: str) -> str:
    """A cannot-run reason (``plan.profile.cannot_run``) short enough for a table cell: "no bf16"."""
    return reason.split(" on this GPU")[0].split(":")[0]


def _total_rows(mem: dict, inf: dict | None) -> list[tuple[str, str]]:
    """The table's last rows: what nvidia-smi shows. Under vLLM that is its pre-allocation (gpu_memory_utilization
    of the GPU: weights, activations and KV cache), not the batch's own peak, which is a row of its own."""
    reserved = (inf or {}).get("serving_reserved_bytes")
    if reserved is None:
        return [("[bold]total (nvidia-smi)[/]", f"[bold]{format_bytes(mem['total_bytes'])}[/]")]
    return [("this batch needs", format_bytes(mem["total_bytes"])),
            (f"[bold]total (nvidia-smi: vLLM's {inf['gpu_memory_utilization']:g} of the GPU)[/]",
             f"[bold]{format_bytes(reserved)}[/]")]


def _serving_time_line(t: dict, inf: dict, w) -> str:
    """The time of a serving step in serving's words: a batch of requests end to end, its requests/s and output
    tokens/s; at --request-rate, one request on an idle replica (what the load does to it is the load's line,
    ``_render_inference``), with no rate of its own that could be read against the rate asked."""
    from gpuwise.runtime.model import bound_word

    batch, prompt, new = inf["batch_size"], inf["prompt_tokens"], inf["new_tokens"]
    each = " each" if batch > 1 else ""
    tokens = f"{prompt:,} + {new:,} tokens{each}" if new else f"{prompt:,} prompt tokens{each}, nothing generated"
    step, bound = format_duration(t["step_time_s"]), f"bound by {bound_word(t['bound'])}"
    if w.request_rate_per_s is not None:
        alone = "one request" if batch == 1 else f"one static batch of {batch} requests"
        return f"Alone on an idle replica, {alone} ({tokens}) takes {step} end to end, {bound}"
    # the step's own rate: N replicas of a traced decoder each run the batch (samples_per_s counts them all)
    requests_per_s = t.get("samples_per_s") or batch / t["step_time_s"]
    replicas = round(requests_per_s * t["step_time_s"] / batch)
    on = f" on each of {replicas} GPUs" if replicas > 1 else ""
    output = f", {requests_per_s * new:,.0f} output tokens/s" if new else ""
    return (f"A batch of {batch} request{'s' if batch > 1 else ''} ({tokens}){on} takes {step} end to end: "
            f"{format_request_rate(requests_per_s)}{output}, {bound}")


def _tight(out: dict) -> bool:
    """Whether the one GPU's fit is "tight" (``memory.uncertainty.fit_wording``'s first word): ``fits`` is false,
    but the estimate's own total is within the memory, so the job may well run, and is timed as one that does."""
    return bool(out.get("fit_summary")) and out["fit_summary"].startswith("tight")


def _out_of_memory(out: dict) -> bool:
    """Whether the job does not fit the one GPU asked about, so that it cannot run there as it is: not timed in
    the text (the JSON's ``time`` is then what the step would take were the memory there). A tight fit may run."""
    return out["fits"] is False and not _tight(out)


def out_of_memory_time_line(where: str, changes_fit: bool) -> str:
    """What the text says in place of the step time of a job that does not fit the GPU asked about (``where``): it
    cannot run there, so no time of its own; ``changes_fit``: the changes listed above it each give theirs."""
    remedy = ("; each change above that makes it fit gives its own step time" if changes_fit else
              "; the advice above says what would make it fit")
    return f"No step time: the job as it is does not fit {where}, so it cannot run there{remedy}"


def capacity_words(inf: dict, *, prefill_only: bool) -> list[str]:
    """The serving capacity in words: the longest context that fits this batch and the largest batch of this
    context, each where it is some; where not one sequence of this context fits, that alone, said once (a 0 of
    each reads as two figures of a job that runs)."""
    max_ctx, max_batch = inf.get("max_context_tokens"), inf.get("max_batch_size")
    if max_batch == 0:
        tokens = inf["prompt_tokens"] + inf["new_tokens"]
        return [f"not one sequence of {tokens:,} tokens fits"]
    parts = []
    if max_ctx:
        parts.append(f"longest context that fits {max_ctx:,} tokens " + ("(prompt)" if prefill_only else
                                                                         "(prompt + answer)"))
    elif max_ctx == 0:
        parts.append(f"no context fits a batch of {inf['batch_size']:,}")
    if max_batch is not None:
        capped = (inf.get("vllm") or {}).get("max_num_seqs") == max_batch
        parts.append(f"largest batch that fits {max_batch:,}" + (" (vLLM's max_num_seqs)" if capped else ""))
    return parts


def _render_inference(inf: dict, *, runs: bool = True) -> None:
    """Serving figures in words; the JSON has every field. ``runs`` False: the job does not fit the GPU, so its
    times (first token, decode rate) are left out, as its step time is (``out_of_memory_time_line``)."""
    parts = []
    prefill_only = inf.get("new_tokens") == 0
    if inf.get("ttft_s") is not None and runs:
        parts.append(f"prefill only (--max-new-tokens 0: prompts scored, nothing generated) "
                     f"{format_duration(inf['ttft_s'])}" if prefill_only else
                     f"time to first token {format_duration(inf['ttft_s'])}")
    if inf.get("decode_tokens_per_s") is not None and runs:
        per_user = inf.get("decode_tokens_per_s_per_user")
        parts.append(f"decode {inf['decode_tokens_per_s']:.1f} tokens/s (all sequences together"
                     + (f"; {per_user:.1f} per request, {inf['time_per_output_token_s'] * 1e3:.1f} ms per output "
                        f"token)" if per_user else ")"))
    if inf.get("kv_cache_bytes") is not None:
        parts.append(f"KV cache {format_bytes(inf['kv_cache_bytes'])}")
    parts.extend(capacity_words(inf, prefill_only=prefill_only))
    c.console.print("Inference: " + ", ".join(parts))
    load = inf.get("at_load")
    if load:
        replicas = load["replicas"]
        c.console.print(
            f"At {format_request_rate(load['request_rate_per_s'])}: {replicas} replica{'s' if replicas > 1 else ''} "
            f"of this deployment (one carries up to {format_request_rate(load['capacity_per_replica_per_s'])}), "
            f"{load['concurrency']:,.1f} requests in flight, each replica at {load['load']:.0%} of the rate it "
            f"carries; each request: first token after {format_duration(load['ttft_s'])}, then "
            f"{format_duration(load['tpot_s'])} a token ({1 / load['tpot_s']:,.0f} tokens/s)")
