"""Fixes: CST edits with an applicability, applied together, re-linted to a fixpoint.

A rule describes *what* changes (replace this node, insert these statements before
that one, add this import); this module decides *whether* the edits of several fixes
can go into one pass (their source spans must not overlap) and performs the pass.
"""

from __future__ import annotations

import bisect
import builtins
import difflib
import enum
import functools
import inspect
import itertools
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState

from torchlint.positions import NodePositions
from torchlint.results import TextEdit
from torchlint.source import split_lines
from torchlint.walk import child_fields, children, descendants


class Applicability(str, enum.Enum):
    """Whether a fix keeps the program's results (`safe`) or may change them."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class FixSafety(str, enum.Enum):
    """A rule's fix, as documented: what `torchlint rules` shows."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    SOMETIMES = "sometimes"  # safe or unsafe depending on the finding
    NONE = "none"


@dataclass(frozen=True)
class Replace:
    """Replace `node` (any CST node) by `new`."""

    node: cst.CSTNode
    new: cst.CSTNode


@dataclass(frozen=True)
class Remove:
    """Remove a statement from its block (a lone statement becomes `pass`)."""

    node: cst.BaseStatement


@dataclass(frozen=True)
class InsertBefore:
    node: cst.BaseStatement
    statements: tuple[cst.BaseStatement, ...]


@dataclass(frozen=True)
class InsertAfter:
    node: cst.BaseStatement
    statements: tuple[cst.BaseStatement, ...]


Edit = Replace | Remove | InsertBefore | InsertAfter


@dataclass(frozen=True)
class Import:
    """`import module` (name None) or `from module import name`. An `early` import is
    added even where the file binds the name already, only later than the code that
    needs it (a notebook cell further down, say)."""

    module: str
    name: str | None = None
    early: bool = False

    def statement(self) -> cst.SimpleStatementLine:
        if self.name is None:
            return cst.parse_statement(f"import {self.module}\n")  # type: ignore[return-value]
        return cst.parse_statement(f"from {self.module} import {self.name}\n")  # type: ignore[return-value]


@dataclass(frozen=True)
class Definition:
    """A module-level statement binding `name`, added once after the imports."""

    name: str
    code: str


@dataclass(frozen=True)
class Fix:
    title: str
    applicability: Applicability
    edits: tuple[Edit, ...]
    imports: tuple[Import, ...] = ()
    definitions: tuple[Definition, ...] = ()


Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


def statements(code: str) -> tuple[Statement, ...]:
    """Parse one or more statements of source code (at column 0), comments kept."""
    module = cst.parse_module(code if code.endswith("\n") else code + "\n")
    body = list(module.body)
    if module.header and body:
        body[0] = body[0].with_changes(leading_lines=[*module.header, *body[0].leading_lines])
    return tuple(body)


def fix(
    title: str,
    applicability: Applicability,
    *edits: Edit,
    imports: Iterable[Import] = (),
    definitions: Iterable[Definition] = (),
) -> Fix:
    return Fix(title, applicability, tuple(edits), tuple(imports), tuple(definitions))


# ---------------------------------------------------------------------------------------
# Overlap: which fixes can share one pass


Span = tuple[tuple[int, int], tuple[int, int]]


Position = tuple[int, int]


class _Planned:
    """The spans of the fixes kept so far: ranges that never overlap one another, and
    insertion points. Each test and addition is a binary search, so choosing among k
    fixes costs O(k log k), not O(k^2)."""

    def __init__(self) -> None:
        self.starts: list[Position] = []  # ranges, sorted by start (hence also by end)
        self.ends: list[Position] = []
        self.points: list[Position] = []  # sorted

    def _range_conflicts(self, start: Position, end: Position) -> bool:
        before = bisect.bisect_left(self.starts, end)  # ranges starting before `end`
        if before and self.ends[before - 1] > start:
            return True
        first = bisect.bisect_right(self.points, start)
        return first < len(self.points) and self.points[first] < end

    def _point_conflicts(self, point: Position) -> bool:
        before = bisect.bisect_left(self.starts, point)
        return bool(before) and self.ends[before - 1] > point

    def conflicts(self, spans: Sequence[tuple[Position, Position, bool]]) -> bool:
        return any(
            self._point_conflicts(start) if point else self._range_conflicts(start, end)
            for start, end, point in spans
        )

    def add(self, spans: Sequence[tuple[Position, Position, bool]]) -> None:
        for start, end, point in spans:
            if point:
                bisect.insort(self.points, start)
                continue
            # Only the edits of one fix can overlap each other: merge them into one range.
            i = bisect.bisect_left(self.starts, start)
            if i and self.ends[i - 1] > start:
                i -= 1
                start = self.starts[i]
            j = i
            while j < len(self.starts) and self.starts[j] < end:
                end = max(end, self.ends[j])
                j += 1
            self.starts[i:j] = [start]
            self.ends[i:j] = [end]


def edit_spans(edit: Edit, span_of) -> list[tuple[tuple[int, int], tuple[int, int], bool]]:
    """The source region an edit touches; inserts touch a point (a statement boundary)."""
    start, end = span_of(edit.node)
    if isinstance(edit, InsertBefore):
        return [(start, start, True)]
    if isinstance(edit, InsertAfter):
        return [(end, end, True)]
    return [(start, end, False)]


def select_compatible(fixes: Sequence[Fix], span_of) -> list[Fix]:
    """Greedily keep fixes (in order) whose edits do not overlap those already kept. A
    statement that several fixes remove (an import each leaves unused) is shared."""
    planned = _Planned()
    chosen: list[Fix] = []
    removed: set[int] = set()
    for candidate in fixes:
        own = [e for e in candidate.edits if not (isinstance(e, Remove) and id(e.node) in removed)]
        spans = [s for edit in own for s in edit_spans(edit, span_of)]
        if planned.conflicts(spans):
            continue
        planned.add(spans)
        chosen.append(candidate)
        removed.update(id(e.node) for e in own if isinstance(e, Remove))
    return chosen


# ---------------------------------------------------------------------------------------
# Applying


class _Apply:
    """Rebuilds only the nodes on the paths from the module to the edited nodes (libcst's
    transformer rebuilds every node of the tree, which dominated the cost of a fix pass)."""

    def __init__(self, fixes: Sequence[Fix]) -> None:
        self.replace: dict[int, cst.CSTNode] = {}
        self.remove: set[int] = set()
        self.before: dict[int, list[cst.BaseStatement]] = {}
        self.after: dict[int, list[cst.BaseStatement]] = {}
        for f in fixes:
            for edit in f.edits:
                key = id(edit.node)
                if isinstance(edit, Replace):
                    self.replace[key] = edit.new
                elif isinstance(edit, Remove):
                    self.remove.add(key)
                elif isinstance(edit, InsertBefore):
                    self.before.setdefault(key, []).extend(edit.statements)
                else:
                    self.after.setdefault(key, []).extend(edit.statements)
        self.targets = {*self.replace, *self.remove, *self.before, *self.after}
        self.on_path: set[int] = set()  # nodes with a target inside (the targets included)

    def __call__(self, module: cst.Module) -> cst.Module:
        new = self.rebuild(module)
        assert isinstance(new, cst.Module)
        return new

    def rebuild(self, root: cst.CSTNode) -> cst.CSTNode:
        """`root` with the edits that fall inside it applied."""
        stack: list[cst.CSTNode] = []
        self.on_path = set()

        def find(node: cst.CSTNode) -> None:
            if id(node) in self.targets:
                self.on_path.update(map(id, stack))
                self.on_path.add(id(node))
            stack.append(node)
            for child in children(node):
                find(child)
            stack.pop()

        find(root)
        return self._rebuild(root)

    def _rebuild(self, node: cst.CSTNode) -> cst.CSTNode:
        replaced = self.replace.get(id(node))
        if replaced is not None:
            return replaced
        if id(node) not in self.on_path:
            return node
        changes: dict[str, object] = {}
        for name in child_fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                new = self._rebuild(value)
                if new is not value:
                    changes[name] = new
            elif isinstance(value, (tuple, list)):
                items = [self._rebuild(v) if isinstance(v, cst.CSTNode) else v for v in value]
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[name] = items
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            body = changes.get("body", node.body)
            assert isinstance(body, (tuple, list))
            changes["body"] = self._body(node.body, body)
        return node.with_changes(**changes) if changes else node

    def _body(self, original: Sequence[cst.BaseStatement], updated: Sequence[cst.BaseStatement]):
        body: list[cst.BaseStatement] = []
        blank = 0  # blank lines above removed statements, kept above the next one
        for orig, upd in zip(original, updated, strict=True):
            key = id(orig)
            body.extend(self.before.get(key, ()))
            if key in self.remove:
                blank = max(blank, _blank_lines_above(orig))
            else:
                missing = blank - _blank_lines_above(upd) if body else 0
                if missing > 0:
                    lines = [cst.EmptyLine()] * missing + list(_leading_lines(upd))
                    upd = upd.with_changes(leading_lines=lines)
                body.append(upd)
                blank = 0
            body.extend(self.after.get(key, ()))
        if not body and original:
            body.append(cst.SimpleStatementLine([cst.Pass()]))
        return body


def _leading_lines(stmt: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    # every statement node has them; BaseStatement does not declare them
    return getattr(stmt, "leading_lines", ())


def _blank_lines_above(stmt: cst.BaseStatement) -> int:
    """The blank lines that open a statement's leading lines (those above its comments)."""
    count = 0
    for line in _leading_lines(stmt):
        if line.comment is not None:
            break
        count += 1
    return count


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


def _top_level_bindings(
    body: Sequence[cst.BaseStatement],
) -> tuple[set[tuple[str, str | None]], set[str]]:
    """Top-level imports as (module, name) pairs, and every top-level bound name."""
    imported: set[tuple[str, str | None]] = set()
    bound: set[str] = set()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                bound.add(stmt.name.value)
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = _dotted(alias.name)
                    if alias.asname is None:
                        imported.add((dotted, None))
                        bound.add(dotted.split(".")[0])
                    elif isinstance(alias.asname.name, cst.Name):
                        bound.add(alias.asname.name.value)
            elif (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
            ):
                if isinstance(small.names, cst.ImportStar):
                    continue
                for alias in small.names:
                    name = _dotted(alias.name)
                    if alias.asname is None:
                        imported.add((_dotted(small.module), name))
                        bound.add(name)
                    elif isinstance(alias.asname.name, cst.Name):
                        bound.add(alias.asname.name.value)
            elif isinstance(small, (cst.Assign, cst.AnnAssign)):
                targets = small.targets if isinstance(small, cst.Assign) else [small]
                for t in targets:
                    if isinstance(t.target, cst.Name):
                        bound.add(t.target.value)
    return imported, bound


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


# ---------------------------------------------------------------------------------------
# Module level: added imports go where isort (ruff's I001, default settings) puts them


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
        name = _dotted(first.names[0].name)
        return _section(name), 0, name.lower(), name
    assert isinstance(first, cst.ImportFrom)
    name = _dotted(first.module) if first.module is not None else ""
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
    name = _dotted(alias.name)
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
                or _dotted(node.module) != imp.module
                or isinstance(node.names, cst.ImportStar)
                or any(alias.asname is not None for alias in node.names)
                or "#" in cst.Module([]).code_for_node(stmt.with_changes(leading_lines=()))
            ):
                continue
            names = sorted(
                [*(_dotted(a.name) for a in node.names), imp.name or ""],
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


def names_in(nodes: Iterable[cst.CSTNode]) -> Counter[str]:
    """The names code reads or binds, with how often (not attribute names, nor keywords
    of arguments)."""
    found: Counter[str] = Counter()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name):
            found[node.value] += 1
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)
        else:
            stack.extend(children(node))
    return found


def _bound(target: cst.BaseExpression) -> set[str]:
    """The names an assignment target binds (`a.b = ...` binds none)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _bound(e.value)}
    return set()


def module_bindings(stmt: cst.CSTNode) -> set[str]:
    """The names a top-level statement binds at module level: in its blocks too (a
    `try:` import), not in the functions and classes it defines."""
    out: set[str] = set()
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            out.add(node.name.value)
        elif isinstance(node, cst.Import | cst.ImportFrom):
            if not isinstance(node.names, cst.ImportStar):
                out.update(
                    alias.asname.name.value
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
                    else _dotted(alias.name).split(".")[0]
                    for alias in node.names
                )
        elif isinstance(node, cst.Assign):
            out.update(n for t in node.targets for n in _bound(t.target))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            out |= _bound(node.target)
        elif isinstance(node, _BLOCKS):
            if isinstance(node, cst.For):
                out |= _bound(node.target)
            elif isinstance(node, cst.With):
                out.update(n for i in node.items if i.asname for n in _bound(i.asname.name))
            stack.extend(children(node))
    return out


_BLOCKS = (
    cst.SimpleStatementLine,
    cst.BaseCompoundStatement,
    cst.BaseSuite,
    cst.ExceptHandler,
    cst.Else,
    cst.Finally,
)
_BUILTINS = frozenset(dir(builtins))


def _after_bindings(body: Sequence[Statement], names: set[str]) -> int:
    """The index after the first top-level statements binding each of `names` (0 when
    the module binds none of them)."""
    names = set(names) - _BUILTINS
    index = 0
    for i, stmt in enumerate(body):
        if not names:
            break
        found = module_bindings(stmt) & names
        if found:
            names -= found
            index = i + 1
    return index


def plan_module_level(
    body: Sequence[Statement],
    imports: Sequence[Import],
    definitions: Sequence[Definition],
    indent: str = "    ",
) -> ModuleLevel | None:
    """Where the missing imports go (each where isort puts it), then the missing
    definitions: after the import block, and after the first statement that binds a
    name they read (an import inside `try:`, a later notebook cell)."""
    imported, bound = _top_level_bindings(body)
    block = _ImportBlock(body)
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
            [block.end, _after_bindings(body, reads - set(new_at))]
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
    if not at and not merged:
        return None
    return ModuleLevel(tuple(at[i] for i in sorted(at)), merged)


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


class _Restyle(cst.CSTTransformer):
    """Line breaks a fix adds inside brackets, indented with the module's unit instead of
    four spaces (tabs stay tabs); those it keeps from the original are left alone."""

    def __init__(self, unit: str, kept: set[int]) -> None:
        super().__init__()
        self.unit = unit
        self.kept = kept

    def leave_ParenthesizedWhitespace(
        self, original_node: cst.ParenthesizedWhitespace, updated_node: cst.ParenthesizedWhitespace
    ) -> cst.ParenthesizedWhitespace:
        text = updated_node.last_line.value
        units = (len(text) - len(text.lstrip(" "))) // 4
        if id(original_node) in self.kept or not units:
            return updated_node
        new = self.unit * units + text[4 * units :]
        return updated_node.with_changes(last_line=cst.SimpleWhitespace(new))


def in_style(module: cst.Module, fix: Fix) -> Fix:
    """`fix` with what it adds indented as the module is (see `_Restyle`)."""
    unit = module.default_indent
    if unit == "    ":
        return fix
    edits: list[Edit] = []
    for edit in fix.edits:
        if isinstance(edit, Replace):
            new = edit.new.visit(_Restyle(unit, {id(n) for n in descendants(edit.node)}))
            assert isinstance(new, cst.CSTNode)
            edits.append(replace(edit, new=new))
        elif isinstance(edit, (InsertBefore, InsertAfter)):
            restyle = _Restyle(unit, set())
            added = [s.visit(restyle) for s in edit.statements]
            assert all(isinstance(s, cst.BaseStatement) for s in added)
            edits.append(replace(edit, statements=tuple(added)))  # type: ignore[arg-type]
        else:
            edits.append(edit)
    return replace(fix, edits=tuple(edits))


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> str:
    """Apply non-overlapping fixes in one pass and return the new source code."""
    new = _Apply([in_style(module, f) for f in fixes])(module)
    new = add_module_level(
        new,
        [imp for f in fixes for imp in f.imports],
        [d for f in fixes for d in f.definitions],
    )
    return new.code


# ---------------------------------------------------------------------------------------
# A fix's edits as text (JSON, SARIF...), without generating the module again


def line_edits(before: str, after: str, first_line: int = 1) -> list[TextEdit]:
    """Whole-line edits that turn `before` (starting at line `first_line`) into `after`."""
    a, b = split_lines(before), split_lines(after)
    return [
        TextEdit((i1 + first_line, 1), (i2 + first_line, 1), "".join(b[j1:j2]))
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if tag != "equal"
    ]


def apply_line_edits(text: str, edits: Iterable[TextEdit]) -> str:
    """`text` with disjoint whole-line edits (`line_edits`, a fix's edits) applied."""
    lines = split_lines(text)
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        lines[edit.start[0] - 1 : edit.end[0] - 1] = [edit.content]
    return "".join(lines)


# (start, end, order among insertions at one offset, new text), in offsets of the code
# libcst generated (the module's text and `NodePositions.popped`).
Splice = tuple[int, int, int, str]
_AFTER, _MODULE_LEVEL, _BEFORE, _IN_PLACE = range(4)
_PASS = cst.SimpleStatementLine([cst.Pass()])


def text_edits(
    module: cst.Module, source: str, positions: NodePositions, fix: Fix
) -> tuple[TextEdit, ...]:
    """The whole-line edits that applying `fix` alone makes to `source` (`module`'s code).

    Each edit is spliced in at the extent of the node it edits (`positions` must hold
    those nodes and the module's statements), with the code generated for what takes
    its place in that node's context; a fix that adds imports or definitions while it
    also reshapes the top level (where they go depends on it), or whose edits overlap,
    is applied to the module instead (the same text, at the cost of generating it)."""
    fix = in_style(module, fix)
    splices = _splices(module, positions, fix)
    if splices is None:
        return tuple(line_edits(source, apply_fixes(module, [fix])))
    return _spliced(source + positions.popped, positions.popped, splices)


def _splices(module: cst.Module, positions: NodePositions, fix: Fix) -> list[Splice] | None:
    adds = bool(fix.imports or fix.definitions)
    top = {id(stmt) for stmt in module.body}
    if adds and (not module.body or any(id(e.node) in top for e in fix.edits)):
        return None
    removed = {id(e.node) for e in fix.edits if isinstance(e, Remove)}
    if any(_blank_lines_above(e.node) for e in fix.edits if isinstance(e, Remove)):
        return None  # the blank lines may move to the next statement (`_Apply._body`)
    anchors = {id(e.node) for e in fix.edits if isinstance(e, (InsertBefore, InsertAfter))}
    out: list[Splice] = []
    for edit in fix.edits:
        start, end = positions.extent(edit.node)
        where = positions.context(edit.node)
        if isinstance(edit, Replace):
            out.append(
                (start, end, _IN_PLACE, _code(module, [edit.new], where.indent, where.kwargs))
            )
        elif isinstance(edit, InsertAfter):
            out.append((end, end, _AFTER, _code(module, edit.statements, where.indent)))
        elif isinstance(edit, InsertBefore):
            out.append((start, start, _BEFORE, _code(module, edit.statements, where.indent)))
        else:
            body = module.body if where.block is None else where.block.body
            if any(id(stmt) not in removed or id(stmt) in anchors for stmt in body):
                out.append((start, end, _IN_PLACE, ""))
            elif edit.node is body[0]:  # the whole block goes: `pass` takes its place
                last = positions.extent(body[-1])[1]
                out.append((start, last, _IN_PLACE, _code(module, [_PASS], where.indent)))
    if adds:
        out += _module_level(module, positions, fix)
    out.sort(key=lambda splice: splice[:3])
    if any(b[0] < a[1] for a, b in itertools.pairwise(out)):
        return None
    return out


def _module_level(module: cst.Module, positions: NodePositions, fix: Fix) -> list[Splice]:
    """The fix's imports and definitions, where `add_module_level` puts them. The top
    level keeps its shape (see `_splices`); a top-level statement the fix edits inside
    is transformed (alone) only where that can change what it binds or imports."""
    body = list(module.body)
    starts = [positions.extent(stmt)[0] for stmt in body]
    applier = _Apply([fix])
    for i in {bisect.bisect_right(starts, positions.extent(e.node)[0]) - 1 for e in fix.edits}:
        if isinstance(body[i], cst.SimpleStatementLine) or any(
            e.node is getattr(body[i], "name", None) for e in fix.edits
        ):
            rebuilt = applier.rebuild(body[i])
            assert isinstance(rebuilt, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            body[i] = rebuilt
    plan = plan_module_level(body, fix.imports, fix.definitions, module.default_indent)
    if plan is None:
        return []
    out: list[Splice] = []
    for i, stmt in plan.merged.items():
        start, end = positions.extent(module.body[i])
        out.append((start, end, _IN_PLACE, _code(module, [stmt], ())))
    for ins in plan.insertions:
        if ins.index < len(body):
            kept = _code(module, body[ins.index].leading_lines[: ins.keep], ())
            at = starts[ins.index] + len(kept)
        else:
            at = positions.extent(module.body[-1])[1]
        text = _code(module, [*ins.statements, *[cst.EmptyLine()] * ins.blank_after], ())
        out.append((at, at, _MODULE_LEVEL, text))
    return out


@functools.cache
def _codegen_kwargs(node_type: type[cst.CSTNode]) -> frozenset[str]:
    return frozenset(inspect.signature(node_type._codegen_impl).parameters) - {"self", "state"}


def _code(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    indent: Sequence[str],
    kwargs: dict[str, Any] | None = None,
) -> str:
    """The code of `nodes` generated where the indentation is `indent` and the parent
    passes `kwargs` (those each node takes: a replacement may be of another type)."""
    state = CodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=list(indent),
    )
    for node in nodes:
        accepted = _codegen_kwargs(type(node))
        node._codegen(state, **{k: v for k, v in (kwargs or {}).items() if k in accepted})
    return "".join(state.tokens)


def _spliced(text: str, popped: str, splices: Sequence[Splice]) -> tuple[TextEdit, ...]:
    """Whole-line edits for sorted, disjoint splices of `text`: each run of lines they
    touch, diffed line by line (the edits a diff of the whole file would give)."""
    lines = split_lines(text)
    starts = list(itertools.accumulate(map(len, lines), initial=0))

    def line_at(offset: int) -> int:  # 0-based index of the line holding `offset`
        return bisect.bisect_right(starts, offset) - 1

    regions: list[tuple[int, int, list[Splice]]] = []
    for splice in splices:
        first, end = starts[line_at(splice[0])], splice[1]
        last = end if starts[line_at(end)] == end else starts[line_at(end) + 1]
        if regions and first <= regions[-1][1]:
            regions[-1] = (regions[-1][0], max(last, regions[-1][1]), [*regions[-1][2], splice])
        else:
            regions.append((first, last, [splice]))
    edits: list[TextEdit] = []
    for first, last, group in regions:
        pieces, at = [], first
        for start, end, _, new in group:
            pieces += [text[at:start], new]
            at = end
        pieces.append(text[at:last])
        edits += line_edits(text[first:last], "".join(pieces), line_at(first) + 1)
    if popped and edits and edits[-1].end[0] == len(lines) + 1:
        edits[-1] = _without_last_newline(edits[-1], lines)
    return tuple(edits)


def _without_last_newline(edit: TextEdit, lines: Sequence[str]) -> TextEdit:
    """An edit that reaches the end of a text whose last newline libcst dropped (and
    drops again): on the text as it is, the new end has no newline either."""
    start, content = edit.start, edit.content
    if (start[0] > len(lines) or not content) and start[0] > 1:  # keep a line to end on
        start, content = (start[0] - 1, 1), lines[start[0] - 2] + content
    for newline in ("\r\n", "\n", "\r"):
        if content.endswith(newline):
            content = content[: -len(newline)]
            break
    return TextEdit(start, edit.end, content, edit.cell)
