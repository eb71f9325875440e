"""Arrows point one way (DESIGN.md): each part imports only the parts below it, never the CLI, and the
shared ground floor (errors, units, text, runlog) imports no part. Function-level imports count too.

The modules import one another without a circle (issue 23), and an import inside a function, which hides
an arrow from the top of the module, is kept only where it is listed below with its reason."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import gpuwise

SRC = Path(gpuwise.__file__).parent
GROUND = {"errors", "units", "text", "table_fit", "atomic", "file_locks", "runlog", "cachedir", "plotfile",
          "visible_devices", "__init__"}
# part -> the parts it may import (DESIGN.md's table), besides the ground floor
ALLOWED = {
    "catalog": set(),
    "workload": set(),
    "trace": {"workload"},
    "memory": {"trace", "catalog", "workload"},
    "runtime": {"trace", "catalog", "workload"},
    "plan": {"memory", "runtime", "trace", "catalog", "workload"},
    "launch": {"plan", "catalog", "workload"},
    "monitor": {"catalog"},
    "report": {"plan", "monitor", "catalog", "workload"},
    # workload: the guard reads the workload= it records through Workload.from_dict, the one reader report and
    # calibrate use, so a bad record is refused in the script, not hours later (DESIGN.md's table had monitor only)
    "guard": {"monitor", "workload"},
    "advise": {"plan", "catalog", "workload", "monitor"},
    "calibrate": {"plan", "memory", "runtime", "report", "catalog", "workload", "monitor"},
    "cli": None,   # the only place that knows all parts
}


# Imports of gpuwise code inside a function, outside cli/ (whose commands import their parts when run):
# (file, function, module) -> why. "cycle: ...": the module imports the importer back (checked below);
# otherwise the third-party package, named first, that an import at the top would load at start-up.
LATE = {
    ("trace/__init__.py", "trace_workload", "gpuwise.trace.tracer"):
        "torch: a cache hit or an unknown model answers without importing it (seconds)",
    ("workload/specs.py", "build", "gpuwise.workload.spec_builders"):
        "torch: resolving a spec (a cached estimate, a typo) never imports it; building the model does",
}


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in SRC.rglob("*.py")}


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement names (``from P import m``: the module P.m where m is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert node.level == 0, "gpuwise imports absolutely"
    subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in MODULES]
    return subs + ([node.module] if len(subs) < len(node.names) else [])


def _ancestors(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _imports(body: list[ast.stmt], *, in_functions: bool):
    """The import statements run when the module is imported (``in_functions=False``: not those in a
    function or under ``if TYPE_CHECKING``), or those run when a function is called, with the function."""
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and not in_functions:
            yield None, stmt
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if in_functions:
                yield from ((stmt.name, n) for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom)))
        elif isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test):
            continue
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):     # class, if, try, with, except
                yield from _imports(getattr(stmt, field, []), in_functions=in_functions)


def _import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """module -> the gpuwise modules importing it runs (with the packages above them, outside its own), and
    module -> the third-party top-level packages it imports at module level."""
    graph, third_party = {}, {}
    for module, path in MODULES.items():
        names = [t for _, n in _imports(ast.parse(path.read_text()).body, in_functions=False) for t in _targets(n)]
        own = _ancestors(module) | {module}
        graph[module] = {m for t in names if t in MODULES for m in ({t} | _ancestors(t)) - own}
        third_party[module] = {t.split(".")[0] for t in names if t.split(".")[0] != "gpuwise"}
    return graph, third_party


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        new = graph[todo.pop()] - seen
        seen |= new
        todo.extend(new)
    return seen


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        found = next((c for m in sorted(graph[module]) if (c := visit(m, path + [module]))), None)
        done.add(module)
        return found

    return next((c for m in sorted(graph) if (c := visit(m, []))), None)


def _late_imports() -> Counter:
    """(file, function, module) of each import of gpuwise code inside a function, outside cli/."""
    found = Counter()
    for module, path in MODULES.items():
        if _part(path) == "cli":
            continue
        for function, node in _imports(ast.parse(path.read_text()).body, in_functions=True):
            for target in _targets(node):
                if target.split(".")[0] == "gpuwise":
                    found[(str(path.relative_to(SRC)), function, target)] += 1
    return found


def _part(path: Path) -> str:
    rel = path.relative_to(SRC)
    if rel.parts == ("__main__.py",):      # `python -m gpuwise`: the CLI's entry, as the gpuwise script
        return "cli"
    return rel.parts[0].removesuffix(".py")


def _imported_parts(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n.split(".")[1] for n in names if n.startswith("gpuwise.") and len(n.split(".")) > 1}


def test_no_part_imports_upward_or_sideways():
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        part = _part(path)
        if part in GROUND:
            allowed = set()
        else:
            assert part in ALLOWED, f"{part}: a part DESIGN.md does not list (add it to the table)"
            allowed = ALLOWED[part]
            if allowed is None:
                continue
        for imported in _imported_parts(path) - GROUND - {part}:
            if imported not in allowed:
                wrong.append(f"{path.relative_to(SRC)} imports gpuwise.{imported}")
    assert not wrong, "\n".join(wrong)


def test_the_old_llm_pipeline_is_gone():
    assert not (SRC / "llm").exists()


def test_modules_import_one_another_without_a_circle():
    cycle = _a_cycle(_import_graph()[0])
    assert cycle is None, "an import circle: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_circle_through_a_package():
    graph = {"a": {"b"}, "b": {"c.d"}, "c.d": {"a"}, "e": set()}
    assert _a_cycle(graph) == ["a", "b", "c.d", "a"]
    assert _a_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_inside_a_function_outside_the_cli_but_the_listed_ones():
    found = _late_imports()
    new = sorted(k for k in found if k not in LATE)
    assert not new, "import at the top of the module (or list it in LATE with its reason):\n" + "\n".join(map(str, new))
    gone = sorted(k for k in LATE if k not in found)
    assert not gone, "no longer imported in the function: remove from LATE:\n" + "\n".join(map(str, gone))
    assert sum(found.values()) == len(LATE) == 2


def test_each_late_import_still_has_its_reason():
    graph, third_party = _import_graph()
    for (file, _, module), why in LATE.items():
        importer = _module(SRC / file)
        if why.startswith("cycle"):
            assert importer in _reachable(graph, module), f"{file}: {module} no longer imports it back: import it at the top"
        else:
            package = why.split(":")[0]
            assert any(package in third_party[m] for m in _reachable(graph, module)), f"{file}: {module} imports no {package}"
