"""The command line: thin typer commands over the parts. Nothing imports this package."""
