"""torchlint/text/libcst_compat.py: the only code that touches libcst's private API, what it
does with it, and the libcst versions it is tested with."""

from __future__ import annotations

import ast
import itertools
import sys
from importlib.metadata import version

import libcst as cst
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from torchlint.text import libcst_compat
from torchlint.text.libcst_compat import (
    TESTED,
    Generation,
    code_at,
    codegen_kwargs,
    statement_offsets,
)

from .conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# CodegenState's hooks: a class elsewhere that defines them reaches into libcst's codegen.
HOOKS = {
    "add_indent_tokens",
    "add_token",
    "after_codegen",
    "before_codegen",
    "decrease_indent",
    "increase_indent",
    "pop_trailing_newline",
    "record_syntactic_position",
}


def private_uses(source: str) -> list[str]:
    """libcst's private API in `source`: `libcst._*` imports and attributes, the
    `_codegen*` methods of nodes, CodegenState's hooks defined in a class."""
    tree = ast.parse(source)
    aliases = {"libcst"}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "libcst":
                    aliases.add(alias.asname or alias.name)
                elif alias.name.startswith("libcst._"):
                    found.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module:
            private = [a.name for a in node.names if a.name.startswith("_")]
            if node.module.startswith("libcst._") or (node.module == "libcst" and private):
                found.append((node.lineno, f"from {node.module} import ..."))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (
            node.attr.startswith("_codegen")
            or (
                isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
            )
        ):
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in HOOKS:
                    found.append((item.lineno, f"def {item.name}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def test_the_scan_finds_each_kind_of_private_use():
    source = """
import libcst as cst
import libcst._nodes.internal
from libcst._nodes.internal import CodegenState
from libcst import _position
cst._nodes
node._codegen(state)
type(node)._codegen_impl
class State:
    def before_codegen(self, node): ...
"""
    assert [use.split(":")[0] for use in private_uses(source)] == [
        "3", "4", "5", "6", "7", "8", "10",
    ]  # fmt: skip
    assert private_uses("import libcst as cst\ncst.Module([]).code_for_node(n)\n") == []


def test_only_the_adapter_touches_libcst_private_api():
    files = [*(ROOT / "torchlint").rglob("*.py"), *(ROOT / "rules").glob("*.py")]
    users = {
        str(path.relative_to(ROOT))
        for path in files
        if private_uses(path.read_text(encoding="utf-8"))
    }
    assert users == {"torchlint/text/libcst_compat.py"}


def _libcst_requirement() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (requirement,) = [r for r in map(Requirement, project["dependencies"]) if r.name == "libcst"]
    return requirement


def test_the_declared_range_is_the_tested_one_and_holds_the_installed_libcst():
    """A new libcst (or a wider range) needs the adapter tested again: then `TESTED`, its
    docstring and pyproject.toml say so together."""
    declared = _libcst_requirement().specifier
    assert declared == SpecifierSet(TESTED)
    assert any(s.operator in {"<", "<=", "==", "~="} for s in declared), "no upper bound"
    assert f"libcst {TESTED}" in (libcst_compat.__doc__ or "")
    assert declared.contains(version("libcst")), (version("libcst"), str(declared))


@pytest.mark.parametrize(
    "source",
    [
        "# header\n\nimport os\n\n\ndef f():\n    return 1\n\nx = 1  # c\n# footer\n",
        "if x:\n\tpass\nelse:\n\ty = 2\n",
        "a = 1\r\nb = 2\r\n",
        "a = 1\nb = 2",  # no last newline: libcst generates it, then drops it
        "# only a comment\n",
        "",
    ],
)
def test_statement_offsets_split_the_module_code_at_its_statements(source):
    module = cst.parse_module(source)
    code, starts = statement_offsets(module)
    assert code == module.code == source
    assert len(starts) == len(module.body) + 1
    generated = code + module.default_newline * (not module.has_trailing_newline)
    for stmt, (start, end) in zip(module.body, itertools.pairwise(starts), strict=True):
        assert generated[start:end] == module.code_for_node(stmt)


def test_codegen_kwargs_are_those_a_parent_may_pass():
    assert "default_comma" in codegen_kwargs(cst.Arg)
    assert codegen_kwargs(cst.Name) == frozenset()


def test_code_at_generates_in_the_context_given():
    module = cst.parse_module("if x:\n\tpass\n")
    arg = cst.Arg(cst.Name("y"))
    assert code_at(module, [arg], (), {"default_comma": True}) == "y, "
    assert code_at(module, [arg], (), {}) == "y"
    # a replacement of another type takes only the arguments it accepts
    assert code_at(module, [cst.Name("y")], (), {"default_comma": True}) == "y"
    block = cst.parse_statement("if y:\n    z = 1\n")
    assert code_at(module, [block], ("\t",)) == "\tif y:\n\t\tz = 1\n"


class Recorded(Generation):
    def __init__(self, module: cst.Module, wanted: set[int]) -> None:
        super().__init__(module, wanted)
        self.log: list[tuple[object, ...]] = []

    def entered(self, node, kwargs):
        block = self.blocks[-1] if self.blocks else None
        self.log.append(("in", node, kwargs, self.indent, block, self.offset))

    def left(self, node):
        self.log.append(("out", node, self.offset))

    def syntactic(self, node, start_node, end_node):
        self.log.append(("syntactic", node, start_node, end_node))
        return super().syntactic(node, start_node, end_node)


def test_generation_reports_the_wanted_nodes_with_their_context():
    module = cst.parse_module("def g(a):\n    return a\nf(a, b)")
    (define, call) = module.body
    first, second = call.body[0].value.args
    ret = define.body.body[0].body[0]
    state = Recorded(module, {id(first), id(second), id(ret), id(define)})
    state.generate(module)
    assert state.code == module.code
    assert state.popped == "\n" and state.offset == len(module.code) + 1
    entered = [e[1:] for e in state.log if e[0] == "in"]
    assert entered == [
        (define, {}, (), None, 0),
        (ret, {"default_semicolon": False}, ("    ",), define.body, 14),
        (first, {"default_comma": True}, (), None, 25),
        (second, {"default_comma": False}, (), None, 28),
    ]
    spans = {}
    for entry in state.log:
        if entry[0] == "in":
            spans[id(entry[1])] = entry[-1]
        elif entry[0] == "out":
            spans[id(entry[1])] = (spans[id(entry[1])], entry[-1])
    code = state.code
    assert code[slice(*spans[id(first)])] == "a, "
    assert code[slice(*spans[id(second)])] == "b"
    assert code[slice(*spans[id(ret)])] == "return a"
    assert ("syntactic", define, None, define.body) in state.log
    wanted = {id(define), id(ret), id(first), id(second)}
    assert {id(e[1]) for e in state.log} == wanted  # no other node is reported
