"""CLI command(s) of this module: not written yet."""

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the app (the owner of this module replaces this)."""
