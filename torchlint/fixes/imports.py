"""Imports and definitions a fix adds at module level: each import where isort (ruff's
I001, default settings) puts it, each definition after the imports and after what it
reads."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

import libcst as cst

from torchlint.fixes.model import Definition, Import, Statement, statements
from torchlint.fixes.names import (
    after_bindings,
    dotted_name,
    module_bindings,
    names_in,
    top_level_bindings,
)

# ruff's isort defaults: sections future, standard library, third party (with first party:
# a linter cannot tell them apart, but keeps an import beside its package's), local;
# straight imports before `from` imports, case-insensitive; 88 columns.
_FUTURE, _STDLIB, _OTHER, _LOCAL = range(4)
LINE_LENGTH = 88
_STDLIB_NAMES = frozenset(sys.stdlib_module_names)


def _section(module: str, relative: bool = False) -> int:
    if relative:
        return _LOCAL
    if module == "__future__":
        return _FUTURE
    return _STDLIB if module.split(".")[0] in _STDLIB_NAMES else _OTHER


def _import_key(stmt: cst.BaseStatement) -> tuple[int, int, str, str]:
    """(section, from-import?, module lowercased, module) of an import statement."""
    assert isinstance(stmt, cst.SimpleStatementLine)
    first = stmt.body[0]
    if isinstance(first, cst.Import):
        name = dotted_name(first.names[0].name)
        return _section(name), 0, name.lower(), name
    assert isinstance(first, cst.ImportFrom)
    name = dotted_name(first.module) if first.module is not None else ""
    return _section(name, bool(first.relative)), 1, name.lower(), name


def _blank(line: cst.EmptyLine) -> bool:
    return line.comment is None


def _head(stmt: Statement) -> int:
    """How many blank lines open `stmt`'s leading lines (before any comment)."""
    n = 0
    for line in stmt.leading_lines:
        if not _blank(line):
            break
        n += 1
    return n


def _member_key(alias: cst.ImportAlias) -> tuple[int, str, str]:
    """isort's `order-by-type`: CONSTANTS, then Classes, then other names."""
    name = dotted_name(alias.name)
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name.lower(), name


@dataclass(frozen=True)
class Insertion:
    """`statements` go before `body[index]` (at the end when index == len(body)), below
    the first `keep` of its leading lines, followed by `blank_after` blank lines."""

    index: int
    statements: tuple[Statement, ...]
    keep: int = 0
    blank_after: int = 0


@dataclass(frozen=True)
class ModuleLevel:
    """What a pass adds at module level: insertions (by index), and `from` imports that
    an added name joins (index -> the statement with it)."""

    insertions: tuple[Insertion, ...]
    merged: dict[int, cst.SimpleStatementLine]


class _ImportBlock:
    """The leading import block of a module (after its docstring): its statements in
    groups (a blank line starts one), and where a new import goes in it."""

    def __init__(self, body: Sequence[Statement]) -> None:
        self.body = body
        self.start = 1 if body and _is_docstring(body[0]) else 0
        self.end = self.start
        while self.end < len(body) and _is_import(body[self.end]):
            self.end += 1
        self.groups: list[list[int]] = []
        for i in range(self.start, self.end):
            if not self.groups or any(map(_blank, body[i].leading_lines)):
                self.groups.append([])
            self.groups[-1].append(i)

    def _group_for(self, key: tuple[int, int, str, str]) -> list[int] | None:
        sections = [{_import_key(self.body[i])[0] for i in group} for group in self.groups]
        if key[0] == _STDLIB:
            return next(
                (g for g, s in zip(self.groups, sections, strict=True) if s == {_STDLIB}), None
            )
        package = key[3].split(".")[0]
        for group in self.groups:  # beside imports of the same package
            if any(_import_key(self.body[i])[3].split(".")[0] == package for i in group):
                return group
        return next((g for g, s in zip(self.groups, sections, strict=True) if _OTHER in s), None)

    def place(self, stmt: cst.SimpleStatementLine) -> Insertion:
        """Where a new import goes: sorted into the group of its section (or package),
        else a group of its own before the first group of a later section."""
        key = _import_key(stmt)
        group = self._group_for(key)
        if group is not None:
            later = [i for i in group if _import_key(self.body[i])[:3] > key[:3]]
            if not later:
                return Insertion(group[-1] + 1, (stmt,))
            keep = _head(self.body[later[0]]) if later[0] == group[0] else 0
            return Insertion(later[0], (stmt,), keep)
        for group in self.groups:
            if min(_import_key(self.body[i])[0] for i in group) > key[0]:
                keep = _head(self.body[group[0]])
                if not keep and group[0] != self.start:
                    stmt = stmt.with_changes(leading_lines=[cst.EmptyLine()])
                return Insertion(group[0], (stmt,), keep, 1)
        if self.groups:  # after the block
            return Insertion(self.end, (stmt.with_changes(leading_lines=[cst.EmptyLine()]),))
        if self.start == len(self.body):
            return Insertion(self.start, (stmt,))
        # The first import: one blank line after it, two before a function or class. Blank
        # lines after a docstring stay above it; at the top of the file (where an import
        # the same pass removes stood) they go below it.
        after = 2 if isinstance(self.body[self.start], (cst.FunctionDef, cst.ClassDef)) else 1
        head = _head(self.body[self.start])
        if self.start:
            return Insertion(self.start, (stmt,), head, after)
        return Insertion(self.start, (stmt,), 0, max(0, after - head))

    def merge(self, imp: Import, indent: str) -> tuple[int, cst.SimpleStatementLine] | None:
        """The `from` import of `imp.module` in the block that `imp.name` can join, and
        the statement with it (isort combines `from` imports of a module; not those
        with `as` names, comments or several statements on the line)."""
        for i in range(self.start, self.end):
            stmt = self.body[i]
            assert isinstance(stmt, cst.SimpleStatementLine)
            node = stmt.body[0]
            if (
                len(stmt.body) != 1
                or not isinstance(node, cst.ImportFrom)
                or node.relative
                or node.module is None
                or dotted_name(node.module) != imp.module
                or isinstance(node.names, cst.ImportStar)
                or any(alias.asname is not None for alias in node.names)
                or "#" in cst.Module([]).code_for_node(stmt.with_changes(leading_lines=()))
            ):
                continue
            names = sorted(
                [*(dotted_name(a.name) for a in node.names), imp.name or ""],
                key=lambda n: _member_key(cst.ImportAlias(cst.Name(n))),
            )
            line = f"from {imp.module} import {', '.join(names)}"
            trailing_comma = node.lpar is not None and isinstance(node.names[-1].comma, cst.Comma)
            if len(line) > LINE_LENGTH or trailing_comma:
                line = "".join(
                    [f"from {imp.module} import (\n", *(f"{indent}{n},\n" for n in names), ")"]
                )
            new = cst.parse_statement(line + "\n")
            assert isinstance(new, cst.SimpleStatementLine)
            return i, new.with_changes(leading_lines=stmt.leading_lines)
        return None


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def plan_module_level(
    body: Sequence[Statement],
    imports: Sequence[Import],
    definitions: Sequence[Definition],
    indent: str = "    ",
) -> ModuleLevel | None:
    """Where the missing imports go (each where isort puts it), then the missing
    definitions: after the import block, and after the first statement that binds a
    name they read (an import inside `try:`, a later notebook cell)."""
    imported, bound = top_level_bindings(body)
    block = _ImportBlock(body)
    at, merged = _place_imports(block, imports, imported, bound, indent)
    _place_definitions(body, block.end, definitions, bound, at)
    if not at and not merged:
        return None
    return ModuleLevel(tuple(at[i] for i in sorted(at)), merged)


def _place_imports(
    block: _ImportBlock,
    imports: Sequence[Import],
    imported: set[tuple[str, str | None]],
    bound: set[str],
    indent: str,
) -> tuple[dict[int, Insertion], dict[int, cst.SimpleStatementLine]]:
    """The insertions (by index) and the joined `from` imports that add the `imports`
    the module lacks (`imported`, `bound`: what its top level imports and binds)."""
    at: dict[int, Insertion] = {}
    merged: dict[int, cst.SimpleStatementLine] = {}
    for imp in dict.fromkeys(imports):
        key = (imp.module, imp.name)
        if not imp.early and (key in imported or (imp.name is None and imp.module in bound)):
            continue
        imported.add(key)
        joined = block.merge(imp, indent) if imp.name is not None else None
        if joined is not None:
            merged[joined[0]] = joined[1]
            block.body = [*block.body[: joined[0]], joined[1], *block.body[joined[0] + 1 :]]
            continue
        insertion = block.place(imp.statement())
        previous = at.get(insertion.index)
        if previous is not None:  # two imports at one place: sorted, the first keeps its lines
            lead = previous.statements[0].leading_lines
            both = sorted(
                (
                    s.with_changes(leading_lines=())
                    for s in (*previous.statements, *insertion.statements)
                ),
                key=_import_key,
            )
            both[0] = both[0].with_changes(leading_lines=lead)
            insertion = replace(previous, statements=tuple(both))
        at[insertion.index] = insertion
    return at, merged


def _place_definitions(
    body: Sequence[Statement],
    first: int,
    definitions: Sequence[Definition],
    bound: set[str],
    at: dict[int, Insertion],
) -> None:
    """Add to the insertions `at` (the imports') the `definitions` of names the module
    does not bind: each at `first` (after the imports) or later, after what it reads."""
    placed: dict[int, list[Statement]] = {}
    new_at: dict[str, int] = {}  # the names the definitions bind: where they go
    for definition in dict.fromkeys(definitions):
        if definition.name in bound:
            continue
        bound.add(definition.name)
        added = list(statements(definition.code))
        binds = set().union(*map(module_bindings, added))
        reads = set(names_in(added)) - binds
        index = max(
            [first, after_bindings(body, reads - set(new_at))]
            + [new_at[name] for name in reads & set(new_at)]
        )
        new_at.update(dict.fromkeys(binds, index))
        if placed.get(index) or index or at:  # a blank line above each definition
            added[0] = added[0].with_changes(
                leading_lines=[cst.EmptyLine(), *added[0].leading_lines]
            )
        placed.setdefault(index, []).extend(added)
    for i, new_defs in placed.items():
        previous = at.get(i, Insertion(i, ()))
        below = body[i].leading_lines[previous.keep :] if i < len(body) else [cst.EmptyLine()]
        # A blank line between the definitions and what follows keeps code readable.
        at[i] = replace(
            previous,
            statements=(*previous.statements, *new_defs),
            blank_after=max(previous.blank_after, int(not below)),
        )


def add_module_level(
    module: cst.Module, imports: Sequence[Import], definitions: Sequence[Definition]
) -> cst.Module:
    """Add the missing imports where isort puts them, then the missing definitions."""
    plan = plan_module_level(module.body, imports, definitions, module.default_indent)
    if plan is None:
        return module
    body = [plan.merged.get(i, stmt) for i, stmt in enumerate(module.body)]
    out: list[Statement] = []
    insertions = {ins.index: ins for ins in plan.insertions}
    for index in range(len(body) + 1):
        stmt = body[index] if index < len(body) else None
        ins = insertions.get(index)
        if ins is not None:
            lines = list(stmt.leading_lines) if stmt is not None else []
            added = list(ins.statements)
            added[0] = added[0].with_changes(
                leading_lines=[*lines[: ins.keep], *added[0].leading_lines]
            )
            out.extend(added)
            if stmt is not None:
                stmt = stmt.with_changes(
                    leading_lines=[*[cst.EmptyLine()] * ins.blank_after, *lines[ins.keep :]]
                )
        if stmt is not None:
            out.append(stmt)
    return module.with_changes(body=out)
