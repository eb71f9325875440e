"""Arrows point one way (DESIGN.md): each part imports only the parts below it, never the CLI, and the
shared ground floor (errors, units, text, runlog) imports no part. Function-level imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import gpuwise

SRC = Path(gpuwise.__file__).parent
GROUND = {"errors", "units", "text", "atomic", "runlog", "cachedir", "__init__", "__main__"}
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
    "guard": {"monitor"},
    "advise": {"plan", "catalog", "workload", "monitor"},
    "calibrate": {"plan", "memory", "runtime", "report", "catalog", "workload", "monitor"},
    "cli": None,   # the only place that knows all parts
}


def _part(path: Path) -> str:
    rel = path.relative_to(SRC)
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
