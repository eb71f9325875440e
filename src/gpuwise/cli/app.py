"""The ``gpuwise`` command. Each command lives in its own module and registers itself here."""

from __future__ import annotations

import sys

import typer

from gpuwise import __version__
from gpuwise.errors import GpuwiseError

app = typer.Typer(
    name="gpuwise",
    help="Which GPU should I rent for this job, what will it cost, and was the one I rented the right one?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        print(f"gpuwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """gpuwise: predict, recommend, watch and right-size GPU rentals."""


def _register_all() -> None:
    # Imported here, not at the top, so that `gpuwise --help` stays fast: torch is imported only by
    # the commands that trace.
    from gpuwise.cli import advise, estimate, gpus, monitor, recommend, report

    for module in (gpus, estimate, recommend, monitor, report, advise):
        module.register(app)


_register_all()


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="gpuwise")
    except GpuwiseError as exc:
        from gpuwise.text import printable  # the message may quote a file: no escape sequences reach the terminal

        print(f"gpuwise: error: {printable(str(exc))}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("gpuwise: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
