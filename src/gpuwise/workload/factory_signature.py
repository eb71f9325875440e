"""What a model factory (``file.py:factory``) takes and returns, read from its source without running it.

Resolving a workload must not import the user's file (that imports torch, and a cached estimate imports
none), yet two answers depend on the factory's signature: the input sizes the factory uses when the user
gives none (its own defaults: ``def unet(batch_size=8, image_size=64)`` runs at 64 px, not gpuwise's 224),
and whether a ``--seq-len``/``--image-size`` changes anything (a factory that takes neither and returns its
own example inputs ignores them). Both are read here with ``ast``; anything the source does not say plainly
(a default that is an expression, a factory that is not a ``def``) is unknown, and nothing is claimed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gpuwise.workload.specs import DEFAULT_IMAGE_SIZE, DEFAULT_SEQ_LEN

# The keyword arguments gpuwise passes a factory that takes them (spec_builders._run_factory).
SIZE_PARAMS = ("batch_size", "seq_len", "image_size")


@dataclass(frozen=True)
class FactorySignature:
    params: frozenset[str]               # the factory's named parameters
    defaults: tuple[tuple[str, int], ...]  # (name, literal int default) of the SIZE_PARAMS that have one
    optional: frozenset[str]             # the parameters that have a default (of any kind)
    returns_inputs: bool                 # every ``return`` gives (module, inputs[, loss]): no input is guessed

    def default(self, name: str) -> int | None:
        return dict(self.defaults).get(name)


def factory_signature(spec: str) -> FactorySignature | None:
    """The signature of the factory ``spec`` names (``path.py:func``), or None when the file cannot be read
    or parsed, or defines no such top-level ``def``."""
    path_str, sep, func = spec.rpartition(":")
    if not sep or not path_str.endswith(".py"):
        return None
    path = Path(path_str)
    try:
        stat = path.stat()
    except OSError:
        return None
    return _read(str(path.resolve()), func, stat.st_mtime_ns, stat.st_size)


def factory_input_sizes(spec: str) -> dict[str, int]:
    """``seq_len``/``image_size`` -> the size a factory runs at when the user gives none: its own literal default,
    or gpuwise's default for a parameter without one (what ``spec_builders`` passes then). A size the factory does
    not take, or whose default is not a plain number, is absent."""
    sig = factory_signature(spec)
    if sig is None:
        return {}
    out = {}
    for name, fallback in (("seq_len", DEFAULT_SEQ_LEN), ("image_size", DEFAULT_IMAGE_SIZE)):
        if name in sig.params and name not in sig.optional:
            out[name] = fallback
        elif sig.default(name) is not None:
            out[name] = sig.default(name)
    return out


@lru_cache(maxsize=64)
def _read(path: str, func: str, mtime_ns: int, size: int) -> FactorySignature | None:   # noqa: ARG001 (cache key)
    """The parsed signature, once per file version (``mtime_ns`` and ``size`` key the cache: an edited file is read
    again)."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func),
                None)
    if node is None:
        return None
    args = node.args
    positional = args.posonlyargs + args.args
    named = positional + args.kwonlyargs
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    defaults = []
    for arg, value in pairs:
        if arg.arg in SIZE_PARAMS and isinstance(value, ast.Constant) and type(value.value) is int:
            defaults.append((arg.arg, value.value))
    returns = list(_returns(node))
    returns_inputs = bool(returns) and all(isinstance(r.value, ast.Tuple) and len(r.value.elts) >= 2
                                           for r in returns)
    return FactorySignature(frozenset(a.arg for a in named), tuple(defaults), frozenset(a.arg for a, _ in pairs),
                            returns_inputs)


def _returns(func: ast.AST):
    """The function's own ``return`` statements (not those of functions defined inside it)."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
