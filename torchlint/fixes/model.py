"""What a fix is: CST edits, the imports and module-level definitions it needs, and
whether it keeps the program's results (its applicability)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst


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
