"""Each shared rule has one home (DESIGN.md; issue 23): a second copy of these in the source fails here.

Precision names are compared only in ``workload/precision.py``; the peak a kernel runs at is one
``rate_key``; the default sequence length, the busy-share time rule, the fit verdict, provider matching
and the serving FLOPs each live in one function."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gpuwise
from gpuwise.workload.precision import NAMES

SRC = Path(gpuwise.__file__).parent
PRECISION_HOME = SRC / "workload" / "precision.py"


def _sources():
    return sorted(SRC.rglob("*.py"))


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_strings(e) for e in node.elts)) if node.elts else set()
    return set()


def _precision_comparisons(path: Path) -> list[str]:
    """``x.precision == "bf16"``, ``precision in ("fp32", "tf32")``, ``{"amp-bf16": …}.get(precision)``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_strings(s) & set(NAMES) for s in sides) and "precision" in ast.unparse(node):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and isinstance(node.func.value, ast.Dict) and {"amp-bf16", "amp-fp16"} & set().union(
                    *(_strings(k) for k in node.func.value.keys if k is not None))):
            found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_precision_names_are_compared_only_in_their_home():
    found = [hit for p in _sources() if p != PRECISION_HOME for hit in _precision_comparisons(p)]
    assert not found, "compare Precision's properties instead (workload/precision.py):\n" + "\n".join(found)


def test_no_second_default_for_a_missing_precision_or_sequence_length():
    pattern = re.compile(r"""or\s+["']amp-(fp16|bf16)["']|or\s+["'](fp32|fp16|bf16)["']\)|seq_len\s+or\s+\d+|or 128\b""")
    found = [f"{p.relative_to(SRC)}:{i}: {line.strip()}" for p in _sources()
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line) and "exit code" not in line and "128+N" not in line]
    assert not found, ("the default rule is workload/precision.py's, the default length "
                       "Workload.tokens_per_sequence:\n" + "\n".join(found))


def _definitions(name: str) -> list[str]:
    return [f"{p.relative_to(SRC)}" for p in _sources()
            for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.FunctionDef) and node.name == name]


def test_each_small_rule_is_defined_once():
    assert _definitions("rate_key") == ["workload/precision.py"]
    assert _definitions("providers") == ["catalog/resolve.py"]
    assert _definitions("busy_time_factor") == ["plan/scaling.py"]
    assert _definitions("fit_verdict") == ["memory/uncertainty.py"]
    assert _definitions("default_precision") == ["workload/precision.py"]
    assert _definitions("fp16_instead") == []


def test_the_copies_that_were_merged_do_not_come_back():
    copies = {
        r"\(1(\.0)?\s*-\s*busy": "plan/scaling.py",                               # busy-share time
        r"matmul_params_per_token\(\)\s*\+\s*\w*\.?attention_flops": "workload/decoder.py",   # serving FLOPs
        r"p\.lower\(\)\s*==\s*provider": "catalog/query.py",                     # provider matching
        r"""["']bf16-emulated["']""": "workload/precision.py",
    }
    for pattern, home in copies.items():
        where = {str(p.relative_to(SRC)) for p in _sources() if re.search(pattern, p.read_text())}
        assert where <= {home}, (pattern, sorted(where - {home}))
