"""No test of gpuwise's own code can skip (issue 23): a test that skips, or takes another path, when a gpuwise
module or attribute is missing passes while the code it tests is gone. Skips stay for what a machine may lack
(a GPU, chromium, Linux's calls, root, an optional extra) and say so in their condition, which then names no
gpuwise code. A required dependency (pyproject's ``dependencies``) is part of gpuwise too: no test skips
when it is missing."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SKIPS = {"skip", "skipif", "xfail", "importorskip"}


def _required_modules() -> frozenset[str]:
    """The top-level modules of the installed distributions gpuwise requires (``transformers``, ``pynvml``...)."""
    deps = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    required = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}
    return frozenset(module for module, dists in packages_distributions().items()
                     if {d.lower().replace("_", "-") for d in dists} & required)


def _called(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _own_names(tree: ast.AST) -> set[str]:
    """Names a test file binds to gpuwise's code: ``import gpuwise.x as y``, ``from gpuwise.x import a``,
    ``m = pytest.importorskip("gpuwise.x")``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "gpuwise"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gpuwise":
            names |= {a.asname or a.name for a in node.names}
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
              and _called(node.value.func) == "importorskip" and "gpuwise" in ast.unparse(node.value)):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _names_own_code(node: ast.AST, own: set[str]) -> bool:
    return "gpuwise" in ast.unparse(node) or any(isinstance(n, ast.Name) and n.id in own for n in ast.walk(node))


def _conditions(call: ast.Call, parents: dict[ast.AST, ast.AST]) -> list[ast.AST]:
    """What decides a skip: its arguments (condition, reason) and the tests of the ifs it stands in."""
    found: list[ast.AST] = [*call.args, *(k.value for k in call.keywords)]
    node = call
    while node in parents:
        node, child = parents[node], node
        if isinstance(node, ast.If) and child is not node.test:
            found.append(node.test)
    return found


def _imports_own_code(nodes: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "gpuwise" for a in n.names)
               or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "gpuwise"
               for stmt in nodes for n in ast.walk(stmt))


def skips_of_own_code(source: str, filename: str = "<test>", required: frozenset[str] = frozenset()) -> list[str]:
    """Each place in a test file's source where a test can skip, or pass another way, on gpuwise's own code
    or on one of the ``required`` modules."""
    tree = ast.parse(source, filename)
    own = _own_names(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node.func) in SKIPS:
            module = node.args[0] if _called(node.func) == "importorskip" and node.args else None
            if (any(_names_own_code(c, own) for c in _conditions(node, parents)) or isinstance(module, ast.Constant)
                    and str(module.value).split(".")[0] in required):
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node)[:100]}")
        elif isinstance(node, ast.Try) and _imports_own_code(node.body):
            caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if caught & {"ImportError", "ModuleNotFoundError", "AttributeError"} or any(h.type is None for h in node.handlers):
                found.append(f"{filename}:{node.lineno}: an import of gpuwise code that may fail (except {sorted(caught)})")
    return found


def test_no_test_skips_or_takes_another_path_when_gpuwise_code_is_missing():
    required = _required_modules()
    assert {"torch", "transformers", "pynvml"} <= required
    found = [hit for path in sorted(TESTS.rglob("*.py"))
             for hit in skips_of_own_code(path.read_text(), str(path.relative_to(TESTS)), required)]
    assert not found, "import gpuwise's code directly; assert the ids a test names exist:\n" + "\n".join(found)


def test_the_check_sees_each_way_a_test_skipped_on_its_own_code_and_leaves_machine_skips_alone():
    own_code = [
        'catalog = pytest.importorskip("gpuwise.catalog")',
        'trace = pytest.importorskip("gpuwise.trace")\nif not hasattr(trace, "trace_workload"):\n    pytest.skip("not yet")',
        'from gpuwise.guard.integrations import lightning\nif lightning.LIGHTNING_AVAILABLE:\n    pytest.skip("installed")',
        '@pytest.mark.skipif(not hasattr(gpuwise, "plan"), reason="no plan")\ndef test_x(): pass',
        'try:\n    import gpuwise.trace.peft\nexcept ImportError:\n    pass',
        'from gpuwise.catalog import load_catalog\nif "t4" not in {g.id for g in load_catalog().gpus}:\n    pytest.skip("no t4")',
    ]
    for source in own_code:
        assert skips_of_own_code(source), source
    assert skips_of_own_code('pytest.importorskip("transformers")', required=frozenset({"transformers"}))
    machine = [
        '@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")\ndef test_x(): pass',
        'if torch.cuda.is_available():\n    pytest.skip("this test is for machines without a GPU")',
        'pytest.importorskip("sky")',
        'from gpuwise.monitor import open_backend\nif done.returncode != 0:\n    pytest.skip("cannot mount a tmpfs")',
    ]
    for source in machine:
        assert not skips_of_own_code(source), source
