"""Every page gpuwise's output points a user at exists in this repository: the strings of the source that are
not docstrings (messages, notes, help texts) name only files a clone has.

Before: every recommend answer ended "times are for PyTorch 2.x eager mode ... (DESIGN.md: the software stack
assumed)", a design document no clone or install holds (a newcomer's trial)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "gpuwise"
PAGE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md)\b")


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _pages_named() -> dict[str, list[str]]:
    """page -> the modules whose non-docstring strings name it."""
    pages: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = _docstring_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                for page in PAGE.findall(node.value):
                    pages.setdefault(page, []).append(str(path.relative_to(REPO)))
    return pages


def test_the_pages_gpuwise_output_names_are_in_the_repository():
    pages = _pages_named()
    assert "docs/catalog.md" in pages      # the scan sees the messages' pages
    missing = {page: where for page, where in pages.items() if not (REPO / page).exists()}
    assert not missing, missing
