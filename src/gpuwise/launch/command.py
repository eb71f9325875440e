"""The user's ``--command``, read once, before any work: what program it runs, with what environment.

gpuwise runs the command itself under torchrun (or, for HF generate's layer split, as one process), on a
machine it did not see: so the command must be one program and its arguments, not a shell line. Refused, each
with one line (``LaunchError``, exit 2): an unbalanced quote; a shell operator (``;`` ``&&`` ``||`` ``|`` ``>``
``<`` ``&`` a backquote, ``$(``, a newline), which the launch would hand to the program as an argument; a
launcher of its own (torchrun, ``python -m torch.distributed.run``, deepspeed, accelerate …), which would start
torchrun inside torchrun; a Python with no script, module or ``-c`` to run. Leading ``NAME=value`` words (a
shell's environment prefix) move into the launch's environment.

How the command becomes torchrun's worker (``Command.torchrun_args``): ``python train.py …`` → ``train.py …``
(torchrun runs the interpreter); ``python -m pkg.mod …`` → ``--module pkg.mod …``; a Python with options of
its own (``python -u train.py``, ``python -X dev -m pkg``, ``python -c CODE``) keeps them, run as a program:
``--no-python python -u train.py``; any other program (``./train.sh``) runs with ``--no-python``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from gpuwise.launch.errors import LaunchError

EXAMPLE = "--command 'python train.py --checkpoint-dir ckpt'"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# what a shell reads as the end of a command, a pipe, a redirection, a subshell or a command substitution
_OPERATOR_CHARS = ";&|<>()"
# a Python option that takes a value (the next word where the option's word has no more letters)
_PY_VALUE_FLAGS = "WX"
_PY_LONG_VALUE_FLAGS = ("--check-hash-based-pycs",)
# programs that launch workers themselves; gpuwise's launch already runs torchrun with the plan's GPUs
_LAUNCHERS = {"torchrun": "torchrun", "deepspeed": "deepspeed", "accelerate": "accelerate launch",
              "mpirun": "mpirun", "mpiexec": "mpiexec", "srun": "srun", "horovodrun": "horovodrun"}
_LAUNCHER_MODULES = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun",
                     "deepspeed": "deepspeed", "deepspeed.launcher.runner": "deepspeed",
                     "accelerate.commands.launch": "accelerate launch", "gpuwise.guard.torchrun": "torchrun"}


@dataclass(frozen=True)
class Command:
    """A checked ``--command``: ``env`` the ``NAME=value`` words it began with, ``argv`` the program and its
    arguments; ``python`` the interpreter word where the program is a Python (else None), ``python_options``
    its own options before what it runs, ``module`` the ``-m`` module or None, ``code`` True for ``-c``."""

    env: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]
    python: str | None = None
    python_options: tuple[str, ...] = ()
    module: str | None = None
    code: bool = False

    @property
    def torchrun_args(self) -> tuple[str, ...]:
        """What follows torchrun's own options: the worker, in torchrun's terms (the module docstring)."""
        if self.python is None:
            plain_script = self.argv[0].endswith(".py")
            return self.argv if plain_script else ("--no-python", *self.argv)
        if self.python_options or self.code:
            return ("--no-python", *self.argv)
        if self.module is not None:     # python -m pkg.mod …, or python -mpkg.mod …
            return ("--module", self.module, *self.argv[3 if self.argv[1] == "-m" else 2:])
        return self.argv[1:]

    @property
    def process_argv(self) -> tuple[str, ...]:
        """The command as one process runs it (no torchrun): a bare ``train.py`` under ``python``."""
        if self.python is None and self.argv[0].endswith(".py"):
            return ("python", *self.argv)
        return self.argv


def parse_command(text: str | None) -> Command:
    """``--command``'s text read as the launch runs it; LaunchError (one line) where it cannot be."""
    text = text or ""
    try:
        words = shlex.split(text)
    except ValueError as e:      # "No closing quotation", "No escaped character"
        raise LaunchError(f"--command {text!r}: {str(e).lower()}: close the quote (or escape it)") from None
    if not words:
        raise LaunchError(f"--command is empty: give the training command to launch, e.g. {EXAMPLE}")
    operator = shell_operator(text)
    if operator is not None:
        raise LaunchError(f"--command: {operator!r} is shell syntax, and the launch runs one program with its "
                          f"arguments, not a shell line: put the commands in a script and give that "
                          f"(--command 'bash job.sh' or 'python train.py ...')")
    env = []
    while words and _ENV_WORD.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    if not words:
        raise LaunchError(f"--command {text!r} sets variables and runs nothing: give the training command, "
                          f"e.g. {EXAMPLE}")
    _refuse_launcher(words)
    if not _PYTHON.match(words[0].rsplit("/", 1)[-1]):
        return Command(tuple(env), tuple(words))
    options, module, code = _python_options(words[1:])
    runs = words[1 + len(options):]
    if module is None and not code and (not runs or runs[0] == "-"):     # nothing, or the script read from stdin
        raise LaunchError(f"--command {text!r}: no script or module in --command (give "
                          f"'python train.py ...' or 'python -m pkg.train ...')")
    if module is not None:
        _refuse_launcher(words, module=module)
    return Command(tuple(env), tuple(words), python=words[0], python_options=tuple(options), module=module,
                   code=code)


def shell_operator(text: str) -> str | None:
    """The first shell operator outside quotes in ``text`` (``;``, ``&&``, ``|``, ``>``, ``$(``, a backquote, a
    newline …), as written; None where there is none. Within double quotes, ``$(`` and a backquote still run."""
    quote, i = None, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote == "'":
            quote = None if ch == "'" else quote
        elif ch == "`" or text.startswith("$(", i):
            return ch if ch == "`" else "$("
        elif quote == '"':
            quote = None if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "\n":
            return "\\n"
        elif ch in _OPERATOR_CHARS:
            run = re.match(f"[{re.escape(_OPERATOR_CHARS)}]+", text[i:]).group(0)
            return run
        i += 1
    return None


def _python_options(words: list[str]) -> tuple[list[str], str | None, bool]:
    """A Python's own options before what it runs (as CPython reads them: ``-uO``, ``-W ignore``, ``-Xdev``),
    the ``-m`` module (None: none) and whether ``-c`` gives the code; the module or the code ends them."""
    options: list[str] = []
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] not in ("-", "--"):
        word = words[i]
        if word.startswith("--"):
            takes_value = word in _PY_LONG_VALUE_FLAGS
            options += words[i:i + 1 + takes_value]
            i += 1 + takes_value
            continue
        for j, letter in enumerate(word[1:], start=1):
            if letter in "mc" + _PY_VALUE_FLAGS:
                value = word[j + 1:] or (words[i + 1] if i + 1 < len(words) else "")
                break
        else:
            options.append(word)
            i += 1
            continue
        if letter in _PY_VALUE_FLAGS:
            options += words[i:i + 1 + (not word[j + 1:])]
            i += 1 + (not word[j + 1:])
            continue
        if j > 1:
            options.append(word[:j])      # the flags before it in the same word: -um pkg.train
        if not value:
            what = "names no module" if letter == "m" else "gives no code"
            raise LaunchError(f"--command: python -{letter} {what}: no script or module in --command (give "
                              f"'python train.py ...' or 'python -m pkg.train ...')")
        return options, (value if letter == "m" else None), letter == "c"
    return options, None, False


def _refuse_launcher(words: list[str], module: str | None = None) -> None:
    """A launcher in the command (``torchrun train.py``, ``python -m torch.distributed.run …``) is refused with
    the command without it: the launch runs torchrun itself, with the plan's GPU count."""
    name = _LAUNCHER_MODULES.get(module) if module is not None else _LAUNCHERS.get(words[0].rsplit("/", 1)[-1])
    if name is None:
        return
    script = next((w for w in words if w.endswith(".py")), None)
    if script is not None:
        given = words[words.index(script):]
        instead = f": give what it starts, e.g. --command {shlex.quote(shlex.join(['python', *given]))}"
    else:
        instead = f": give the script it starts, e.g. {EXAMPLE}"
    raise LaunchError(f"--command starts {name}, a launcher of its own, and the launch already runs the script under "
                      f"torchrun with the plan's GPUs (one launcher under the other starts every worker several "
                      f"times over){instead}")
