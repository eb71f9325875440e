"""`gpuwise gpus`: the GPU catalog (specs and indicative prices) as a table or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from gpuwise.cli import common as c
from gpuwise.text import for_console
from gpuwise.units import format_money

if TYPE_CHECKING:
    from gpuwise.catalog.query import GpuRow


NamesArg = Annotated[
    Optional[list[str]], typer.Argument(help="GPUs to show: id, alias or NVML name (default: all).")
]
MinMemoryOpt = Annotated[
    Optional[str], typer.Option("--min-memory", help="Only GPUs with at least this memory, e.g. 24GB.")
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
    from gpuwise.catalog.query import check_sort, gpu_record, select_gpus
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
    c.console.print(c.fit_to_console(_gpu_table(rows, cheapest)))
    shown = [o for o in cheapest.values() if o is not None]
    if (names or provider) and any(r.offers for r in rows):
        c.console.print(c.fit_to_console(_offer_table(rows)))
        shown += [o for r in rows for o in r.offers]
    elif names or provider:
        c.console.print(no_offer_line(rows, provider))
    if stale := stale_price_note(shown):
        c.console.print(f"[yellow]note: {escape(stale)}[/]")
    c.console.print(
        "[dim]GiB: memory as the driver reports it (nvidia-smi). Dense peak TFLOPS; fp16 with fp32 accumulate, = bf16 where the GPU has bf16 (not before Ampere). "
        "* = datasheet figures not cross-checked. "
        "Shipped prices are indicative: --json gives each one's source and date.[/dim]"
    )


def no_offer_line(rows: list[GpuRow], provider: str | None) -> str:
    """What stands for an offers table with no row: "no offer from lambda for t4"."""
    ids = ", ".join(for_console(r.gpu.id) for r in rows)
    return f"no offer{' from ' + for_console(provider) if provider else ''} for {ids or 'these GPUs'}"


def _gib(n_bytes: int) -> str:
    """Memory as the driver reports it (what nvidia-smi and every fit use), as ``memory_gib_shown`` rounds it:
    22.5 for an A10, 80 for an A100."""
    from gpuwise.catalog.query import memory_gib_shown

    gib = memory_gib_shown(n_bytes)
    return f"{gib:.0f}" if gib == round(gib) else f"{gib:.1f}"


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
    table = Table(title="offers (shipped ones are indicative)", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("GPU", min_width=max((len(r.gpu.id) for r in rows), default=3), no_wrap=True)
    for col, just in (("provider", "left"), ("n", "right"), ("price/h", "right"), ("/GPU-h", "right"),
                      ("checked", "left"), ("", "left")):
        table.add_column(col, justify=just, no_wrap=True)
    for row in rows:
        for o in row.offers:
            note = ", ".join(w for w, on in (("spot", o.spot), ("yours", o.own)) if on)
            table.add_row(
                for_console(row.gpu.id), for_console(o.provider), str(o.count),
                format_money(o.price_per_hour, o.currency), format_money(o.price_per_gpu_hour, o.currency),
                for_console(o.checked), note,
            )
    return table
