"""`gpuwise gpus`: the GPU catalog (specs and indicative prices) as a table or JSON."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from gpuwise.cli import common as c
from gpuwise.text import for_console
from gpuwise.units import format_money

if TYPE_CHECKING:
    from gpuwise.catalog.model import GPU, Offer
    from gpuwise.catalog.query import GpuRow


NamesArg = Annotated[
    Optional[list[str]], typer.Argument(help="GPUs to show: id, alias or NVML name (default: all).")
]
MinMemoryOpt = Annotated[
    Optional[str], typer.Option("--min-memory", help="Only GPUs with at least this memory, with a unit: 24GiB (as the GiB column counts) or 24GB.")
]
ProviderOpt = Annotated[
    Optional[str],
    typer.Option("--provider", help="Only this provider's offers (and, unless GPUs are named, the GPUs it offers)."),
]
SortOpt = Annotated[
    Optional[str], typer.Option("--sort", help="price (cheapest GPU-hour first), memory or fp16 (largest first).")
]


def register(app: typer.Typer) -> None:
    app.command("gpus")(gpus)


def gpus(
    names: NamesArg = None,
    min_memory: MinMemoryOpt = None,
    provider: ProviderOpt = None,
    sort: SortOpt = None,
    catalog: c.CatalogOpt = None,
    live: c.LiveOpt = False,
    json_out: c.JsonOpt = False
) -> None:
    """GPU specs (dense peak rates, memory, bandwidth) and the offers to rent them.

    Shipped prices are indicative and dated. Your own go in ~/.config/gpuwise/catalog.toml or --catalog FILE.
    """
    from dataclasses import replace

    from gpuwise.catalog.model import stale_price_note
    from gpuwise.catalog.query import check_sort, gpu_record, left_out_by_memory, select_gpus
    from gpuwise.plan.offers import cheapest_to_rent_one, offers_as_priced, price_key

    cat = c.load_catalog_for(catalog, live)
    min_bytes = c.size_option("--min-memory", min_memory) if min_memory is not None else None
    sort = check_sort(sort)
    rows = select_gpus(cat, names or (), min_memory_bytes=min_bytes, provider=provider, sort=sort)
    rows = [replace(r, offers=tuple(offers_as_priced(r.offers))) for r in rows]   # your price where it applies
    currency, cheapest = cheapest_to_rent_one({r.gpu.id: r.offers for r in rows})
    if sort == "price":
        rows = sorted(rows, key=lambda r: price_key(cheapest[r.gpu.id], currency))
    if json_out:
        c.print_json({"gpus": [gpu_record(r.gpu, r.offers) for r in rows]})
        return
    left_out = (left_out_by_memory(cat, names or (), min_memory_bytes=min_bytes, provider=provider)
                if min_bytes is not None else [])
    if rows:
        c.console.print(_fit(_gpu_table(rows, cheapest)))
    if line := memory_note(bool(rows), left_out, min_memory, min_bytes):
        c.console.print(line)
    shown = [o for o in cheapest.values() if o is not None]
    if (names or provider) and any(r.offers for r in rows):
        c.console.print(_fit(_offer_table(rows)))
        shown += [o for r in rows for o in r.offers]
    elif (names or provider) and rows:
        c.console.print(no_offer_line(rows, provider))
    if stale := stale_price_note(shown):
        c.console.print(f"[yellow]note: {escape(stale)}[/]")
    c.console.print(f"[dim]{escape(footnote(shown, named=bool(names or provider)))}[/dim]")


def footnote(shown: list[Offer], *, named: bool = False) -> str:
    """The lines under the tables, one plain sentence for each thing a newcomer asks of them: which memory, what
    "dense" peak means, what the star and the "from" price are, where the shipped prices of ``shown`` come from and
    when they were checked, and what a marketplace's price is (where one is among ``shown``). ``named``: GPUs or a
    provider were named, so every offer and its region is in the table already (no "name GPUs to see" hint)."""
    from gpuwise.catalog.topology import rents_per_gpu

    sentences = [
        "GiB: memory as the driver reports it (nvidia-smi).",
        "fp32 to fp8: peak TFLOPS from the datasheet, dense (without the 2:4 sparsity that doubles NVIDIA's "
        "headline figures); fp16 is with fp32 accumulate, and bf16 equals it where the GPU has bf16 "
        "(not before Ampere).",
        "* = datasheet figures not cross-checked against a second source.",
        "from /GPU-h: the cheapest on-demand price to rent one GPU alone for an hour (spot where there is none), "
        "currencies compared at dated exchange rates" + ("." if named else "; name GPUs to see every offer."),
    ]
    shipped = [o for o in shown if o.indicative]
    if checked := sorted({o.checked for o in shipped}):
        when = checked[0] if len(checked) == 1 else f"{checked[0]} to {checked[-1]}"
        sentences.append(f"Shipped prices are indicative, from each provider's public price list, checked {when} "
                         "(--json gives each one's source).")
    if clouds := sorted({o.provider for o in shipped if not rents_per_gpu(o.provider)}):
        regional = sorted({o.provider for o in shipped if o.region and o.provider in clouds})
        which = "" if named else " (name GPUs to see which)"
        where = f"; the prices of {_listed(regional)} are for one region{which}" if regional else ""
        sentences.append(f"{_listed(clouds)} price{'s' if len(clouds) == 1 else ''} a whole instance, CPU and RAM "
                         f"included{where}.")
    if marketplaces := sorted({o.provider for o in shown if rents_per_gpu(o.provider)}):
        are = "is a marketplace" if len(marketplaces) == 1 else "are marketplaces"
        sentences.append(f"{_listed(marketplaces)} {are}: a price there is a list price per card, set by many "
                         "hosts, and a card at it may not be free when you look.")
    return " ".join(sentences)


def _listed(names: list[str]) -> str:
    """"aws", "aws and gcp", "aliyun, aws and gcp"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def no_offer_line(rows: list[GpuRow], provider: str | None) -> str:
    """What stands for an offers table with no row: "no offer from lambda for t4"."""
    ids = ", ".join(for_console(r.gpu.id) for r in rows)
    return f"no offer{' from ' + for_console(provider) if provider else ''} for {ids or 'these GPUs'}"


def memory_note(any_shown: bool, left_out: list[GPU], min_memory: str | None, min_bytes: int | None) -> str | None:
    """The line under the table on what ``--min-memory`` left out: with no GPU left, the largest of those it left out
    ("no GPU has --min-memory 1TB (931.3 GiB): the largest, b200, has 180 GiB"), in place of an empty table; else the
    GPUs just under it (``near_threshold``), named with their figure. None when neither applies."""
    from gpuwise.catalog.query import NEAR_MISS_FRACTION, memory_gib_shown, near_threshold

    if min_memory is None or min_bytes is None or not left_out:
        return None
    written = min_memory.strip()
    asked = f"--min-memory {for_console(written)}" + (
        "" if written.lower().endswith("gib") else f" ({_gib_figure(min_bytes / 2**30)} GiB)")
    if not any_shown:
        largest = left_out[0]
        return (f"no GPU has {asked}: the largest, {for_console(largest.id)}, has "
                f"{_gib(largest.visible_memory_bytes)} GiB")
    near = near_threshold(left_out, min_bytes)
    if not near:
        return None
    named = ", ".join(f"{for_console(g.id)} ({_gib(g.visible_memory_bytes)} GiB)" for g in near)
    keep_gib = math.floor(min(memory_gib_shown(g.visible_memory_bytes) for g in near))
    return (f"note: within {NEAR_MISS_FRACTION:.0%} of {asked} but left out: {named}; "
            f"--min-memory {keep_gib}GiB keeps {'it' if len(near) == 1 else 'them'}")


def _gib(n_bytes: int) -> str:
    """Memory as the driver reports it (what nvidia-smi and every fit use), as ``memory_gib_shown`` rounds it:
    22.5 for an A10, 80 for an A100."""
    from gpuwise.catalog.query import memory_gib_shown

    return _gib_figure(memory_gib_shown(n_bytes))


def _gib_figure(gib: float) -> str:
    """80 for 80.0, 22.5 for 22.5, 74.5 for 80 GB's 74.51 GiB."""
    return f"{gib:.0f}" if round(gib, 1) == round(gib) else f"{gib:.1f}"


def _fit(table: Table) -> Table:
    """``table`` for the console: one space between columns where the usual three make it too wide (a MIG slice's
    long id at 80 columns), then ``fit_to_console`` (cells wrap) where that is still too wide."""
    if c.natural_width(table) > c.console.width:
        table.padding = (0, 0)
    return c.fit_to_console(table)


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _gpu_table(rows: list[GpuRow], cheapest: dict) -> Table:
    # Fits an 80-column terminal; the full datasheet is in --json. bf16 equals fp16 wherever a GPU has it.
    table = Table(title=f"{len(rows)} GPU{'' if len(rows) == 1 else 's'}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    id_width = max((len(r.gpu.id) + 1 for r in rows), default=3)
    table.add_column("GPU", min_width=id_width, no_wrap=True)
    for col in ("GiB", "GB/s", "fp32", "tf32", "fp16", "fp8"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("from /GPU-h", no_wrap=True)
    for row in rows:
        gpu = row.gpu
        best = cheapest[gpu.id]
        price = (f"{format_money(best.price_per_gpu_hour, best.currency)} {for_console(best.provider)}"
                 + (" spot" if best.spot else "")) if best else "-"
        table.add_row(
            for_console(gpu.id + ("" if gpu.verified else "*")),
            _gib(gpu.visible_memory_bytes),
            f"{gpu.memory_bandwidth_gbs:.0f}",
            *(_rate(gpu.peak(p)) for p in ("fp32", "tf32", "fp16", "fp8")),
            price,
        )
    return table


def _offer_table(rows: list[GpuRow]) -> Table:
    # Dates and amounts are read whole ("2026-11-" / "20", and "¥120.0" / "0" misread as ¥120.0): their columns get
    # a fixed width, which ``fit_to_console`` leaves alone, so in a table too wide for the console the provider and
    # the note give way instead.
    # A cloud's price is one region's (its others' differ): the region column, where any offer shown names one.
    with_region = any(o.region for row in rows for o in row.offers)
    cells = [
        (for_console(row.gpu.id), for_console(o.provider), str(o.count), format_money(o.price_per_hour, o.currency),
         format_money(o.price_per_gpu_hour, o.currency), for_console(o.checked),
         *((for_console(o.region),) if with_region else ()),
         ", ".join(w for w, on in (("spot", o.spot), ("yours", o.own)) if on))
        for row in rows for o in row.offers
    ]
    table = Table(title="offers (shipped ones are indicative)", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("GPU", min_width=max((len(r.gpu.id) for r in rows), default=3), no_wrap=True)
    whole = ("price/h", "/GPU-h", "checked")
    columns = (("provider", "left"), ("n", "right"), ("price/h", "right"), ("/GPU-h", "right"), ("checked", "left"),
               *((("region", "left"),) if with_region else ()), ("", "left"))
    for i, (col, just) in enumerate(columns, start=1):
        width = max([len(col)] + [len(row[i]) for row in cells]) if col in whole else None
        table.add_column(col, justify=just, no_wrap=True, width=width)
    for row in cells:
        table.add_row(*row)
    return table
