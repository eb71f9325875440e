"""The ``gpuwise`` command. Each command lives in its own module and registers itself here."""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys

import typer

from gpuwise import __version__
from gpuwise.errors import GpuwiseError

# The command modules, in `gpuwise --help` order, and the commands each registers.
COMMAND_MODULES = {"gpus": ("gpus",), "estimate": ("estimate",), "recommend": ("recommend",),
                   "monitor": ("watch", "run", "exporter"), "report": ("report",), "advise": ("advise",),
                   "calibrate": ("calibrate",)}


class _LazyTyper(typer.Typer):
    """Imports the command modules when the commands are first needed, all of them by default.

    ``main`` registers only the module of the command typed, so that `gpuwise estimate` does not pay
    for importing what `advise` or `report` need (numpy, the planner): a misspelt model is refused
    in a fraction of a second.
    """

    _registering = False
    _lazy = False   # True while ``main`` runs one command: only the module it registered counts

    @property
    def registered_commands(self):
        if not self._lazy and not self._registering:   # a module registering itself reads this list too
            self._registering = True
            try:
                _register(COMMAND_MODULES)
            finally:
                self._registering = False
        return self._registered

    @registered_commands.setter
    def registered_commands(self, value):
        self._registered = value

    def command(self, name=None, **kwargs):
        """``Typer.command``, with the docstring reflowed (typer keeps a docstring's line breaks)."""
        def decorator(f):
            if kwargs.get("help") is None and f.__doc__:
                kwargs["help"] = reflow(f.__doc__)
            return typer.Typer.command(self, name, **kwargs)(f)
        return decorator


def reflow(doc: str) -> str:
    """A docstring as terminal help: the lines of a paragraph joined, so the terminal wraps them.

    Paragraphs stay apart; a line starting a list item (``- ``, ``* ``) or indented (an example)
    keeps its own line.
    """
    import inspect
    import re

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(re.sub(r"\n(?![-*] |\s)", " ", p) for p in paragraphs)


app = _LazyTyper(
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


_REGISTERED: set[str] = set()


def _register(modules) -> None:
    """Registers each command module once (a process may run several commands: tests, notebooks)."""
    import importlib

    for name in modules:
        if name not in _REGISTERED:
            _REGISTERED.add(name)
            importlib.import_module(f"gpuwise.cli.{name}").register(app)


def _modules_for(argv: list[str]) -> list[str] | None:
    """The one command module ``argv`` needs, or None (help, version, or no command: all of them)."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or any(a in ("--help", "--version") for a in argv[: argv.index(words[0])]):
        return None
    return [m for m, commands in COMMAND_MODULES.items() if words[0] in commands] or None


class _OneLine(logging.Formatter):
    """``gpuwise: warning: …``: library warnings read like the CLI's own lines, escape sequences removed."""

    def format(self, record: logging.LogRecord) -> str:
        from gpuwise.text import printable

        return f"gpuwise: {record.levelname.lower()}: {printable(record.getMessage())}"


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (tests and notebooks swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _log_to_stderr() -> None:
    """The library reports through ``logging`` (the ``gpuwise`` loggers); the command shows WARNING and up."""
    logger = logging.getLogger("gpuwise")
    if not any(getattr(h, "_gpuwise_cli", False) for h in logger.handlers):
        handler = _Stderr()
        handler.setFormatter(_OneLine())
        handler._gpuwise_cli = True
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def _usage_error_in_one_line(exc) -> None:
    """A bad option value or a missing argument, as every other bad input is said: one line on stderr (typer
    would draw the usage and a boxed panel: five lines for '--num-gpus abc'). Exit code 2 as click's."""
    if exc.__class__.__name__ == "NoArgsIsHelpError":     # bare `gpuwise`: typer prints the help itself
        return
    from gpuwise.text import printable

    ctx = getattr(exc, "ctx", None)
    hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    print(f"gpuwise: error: {printable(exc.format_message())}{hint}", file=sys.stderr)


class _PatchOnLoad(importlib.abc.Loader):
    """Loads typer.rich_utils as usual, then replaces its usage-error printer."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        module.rich_format_error = _usage_error_in_one_line


class _RichUtilsHook(importlib.abc.MetaPathFinder):
    """typer imports rich_utils only to print help or a usage error (~70 ms of rich): patch it when it loads."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "typer.rich_utils":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchOnLoad(spec.loader)
        return spec


def _say_usage_errors_in_one_line() -> None:
    # typer.core._main calls rich_utils.rich_format_error for click's usage errors, looked up on the module at
    # each call: the place a CLI built on typer can say them its own way, without loading rich_utils up front
    loaded = sys.modules.get("typer.rich_utils")
    if loaded is not None:
        loaded.rich_format_error = _usage_error_in_one_line
    elif not any(isinstance(f, _RichUtilsHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _RichUtilsHook())


def main(argv: list[str] | None = None) -> None:
    _log_to_stderr()
    _say_usage_errors_in_one_line()
    if (common := sys.modules.get("gpuwise.cli.common")) is not None:   # an earlier command in this process
        common.size_to_terminal()                                        # made the consoles: today's width
    modules = _modules_for(sys.argv[1:] if argv is None else argv)
    if modules is not None:
        app._lazy = True
        _register(modules)
    try:
        app(args=argv, prog_name="gpuwise")
    except GpuwiseError as exc:
        from gpuwise.text import printable  # the message may quote a file: no escape sequences reach the terminal

        print(f"gpuwise: error: {printable(str(exc))}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("gpuwise: interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        app._lazy = False   # the next command in this process (tests, notebooks) sees every command


if __name__ == "__main__":
    main()
