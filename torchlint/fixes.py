"""Fixes: CST edits with an applicability, applied together, re-linted to a fixpoint.

A rule describes *what* changes (replace this node, insert these statements before
that one, add this import); this module decides *whether* the edits of several fixes
can go into one pass (their source spans must not overlap) and performs the pass.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import libcst as cst

from torchlint.walk import child_fields, children


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
    """`import module` (name None) or `from module import name`."""

    module: str
    name: str | None = None

    @property
    def bound_name(self) -> str:
        return self.name if self.name else self.module.split(".")[0]

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
    """Greedily keep fixes (in order) whose edits do not overlap those already kept."""
    planned = _Planned()
    chosen: list[Fix] = []
    for candidate in fixes:
        spans = [s for edit in candidate.edits for s in edit_spans(edit, span_of)]
        if planned.conflicts(spans):
            continue
        planned.add(spans)
        chosen.append(candidate)
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
        stack: list[cst.CSTNode] = []

        def find(node: cst.CSTNode) -> None:
            if id(node) in self.targets:
                self.on_path.update(map(id, stack))
                self.on_path.add(id(node))
            stack.append(node)
            for child in children(node):
                find(child)
            stack.pop()

        find(module)
        new = self._rebuild(module)
        assert isinstance(new, cst.Module)
        return new

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
        for orig, upd in zip(original, updated, strict=True):
            key = id(orig)
            body.extend(self.before.get(key, ()))
            if key not in self.remove:
                body.append(upd)
            body.extend(self.after.get(key, ()))
        if not body and original:
            body.append(cst.SimpleStatementLine([cst.Pass()]))
        return body


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


def _top_level_bindings(module: cst.Module) -> tuple[set[tuple[str, str | None]], set[str]]:
    """Top-level imports as (module, name) pairs, and every top-level bound name."""
    imported: set[tuple[str, str | None]] = set()
    bound: set[str] = set()
    for stmt in module.body:
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


def add_module_level(
    module: cst.Module, imports: Sequence[Import], definitions: Sequence[Definition]
) -> cst.Module:
    """Add missing imports after the import block, then missing definitions after them."""
    imported, bound = _top_level_bindings(module)
    new_imports: list[cst.BaseStatement] = []
    for imp in dict.fromkeys(imports):
        key = (imp.module, imp.name)
        if key in imported or (imp.name is None and imp.module in bound):
            continue
        imported.add(key)
        new_imports.append(imp.statement())
    new_defs: list[Statement] = []
    for definition in dict.fromkeys(definitions):
        if definition.name in bound:
            continue
        bound.add(definition.name)
        added = list(statements(definition.code))
        if new_defs:  # a blank line between definitions
            added[0] = added[0].with_changes(
                leading_lines=[cst.EmptyLine(), *added[0].leading_lines]
            )
        new_defs.extend(added)
    if not new_imports and not new_defs:
        return module
    body = list(module.body)
    # Skip the docstring and `from __future__` imports, then the leading import block.
    i = 1 if body and _is_docstring(body[0]) else 0
    while i < len(body) and _is_import(body[i]):
        i += 1
    # Place new imports after the last import of the leading block (also past guarded
    # `try: import x` blocks is not attempted: precision over cleverness).
    head, tail = body[:i], body[i:]
    if new_defs and tail:
        # A blank line between the definitions and what follows keeps code readable.
        first = tail[0]
        if not first.leading_lines:
            tail[0] = first.with_changes(leading_lines=[cst.EmptyLine()])
    if new_defs and (head or new_imports):
        first_def = new_defs[0]
        new_defs[0] = first_def.with_changes(
            leading_lines=[cst.EmptyLine(), *first_def.leading_lines]
        )
    return module.with_changes(body=[*head, *new_imports, *new_defs, *tail])


def apply_fixes(module: cst.Module, fixes: Sequence[Fix]) -> str:
    """Apply non-overlapping fixes in one pass and return the new source code."""
    new = _Apply(fixes)(module)
    new = add_module_level(
        new,
        [imp for f in fixes for imp in f.imports],
        [d for f in fixes for d in f.definitions],
    )
    return new.code
