"""The layering contract: no import cycles, function-local imports included (a local
import only hides a cycle), and the result types are a leaf."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import ROOT


def _modules() -> dict[str, Path]:
    found = {}
    for package, directory in (
        ("torchlint", ROOT / "torchlint"),
        ("torchlint.rules", ROOT / "rules"),
    ):
        for path in directory.rglob("*.py"):
            parts = path.relative_to(directory).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = path
    return found


def _runtime_imports(path: Path) -> set[str]:
    """Every module named by an import that runs (not under `if TYPE_CHECKING:`)."""
    names: set[str] = set()
    skipped: set[int] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        ancestors = {name.rsplit(".", n)[0] for n in range(1, name.count(".") + 1)}
        graph[name] = (_runtime_imports(path) & modules.keys()) - ancestors - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for dep in sorted(graph[name]):
            found = visit(dep, [*path, name])
            if found:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, [])
        if found:
            return found
    return None


def test_graph_sees_function_local_imports():
    graph = _graph()
    assert "torchlint.verify.command" in graph["torchlint.verify"]  # imported in a function
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycles():
    assert _cycle(_graph()) is None


def test_results_is_a_leaf():
    assert not {n for n in _runtime_imports(ROOT / "torchlint" / "results.py") if "torchlint" in n}
