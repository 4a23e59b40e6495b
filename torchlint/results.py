"""Plain result types: what the linter finds, what a run asks for and gets back per file.

A leaf: it imports nothing of torchlint at run time, so the runner, the process pool,
the cache, the reporters and the notebook support all share these types without
importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchlint.semantic import Settings


@dataclass(frozen=True)
class TextEdit:
    """Replace text from `start` to `end` (1-based line, 1-based column) by `content`."""

    start: tuple[int, int]
    end: tuple[int, int]
    content: str
    cell: int | None = None  # notebooks: the cell the positions are relative to


@dataclass(frozen=True)
class FixRecord:
    title: str
    applicability: str  # "safe" | "unsafe"
    edits: tuple[TextEdit, ...] = ()


@dataclass(frozen=True)
class Violation:
    """A finding with resolved positions: what reporters and the cache see."""

    code: str
    name: str
    message: str
    line: int  # 1-based
    column: int  # 1-based, in characters
    end_line: int
    end_column: int
    fix: FixRecord | None = None
    cell: int | None = None  # notebooks: 1-based cell number; line/column are then in the cell


@dataclass
class FileResult:
    """What happened to one file; plain data (picklable, cacheable)."""

    path: str  # as shown to the user
    violations: list[Violation] = field(default_factory=list)
    error: str | None = None
    warning: str | None = None  # analysed only in part (too large: syntax only)
    fixed: list[str] = field(default_factory=list)  # codes of applied fixes
    # Codes among `fixed` of findings that only other fixes brought about.
    later: list[str] = field(default_factory=list)
    diff: str | None = None  # with --diff: what --fix would change
    text: str | None = None  # the (fixed) text the violations point into
    fixed_text: str | None = None  # stdin in fix mode: the fixed source to print
    # Notebooks (text is None): every cell's (fixed) source, by cell number - 1; a
    # violation's line and column point into the cell named by its `cell`.
    cells: list[str] | None = None
    # A file of a project: what it tells the rest of the project (a Summary as plain
    # data), and what the rest told it (Environment.answers): the result holds while
    # those answers do.
    summary: dict[str, Any] | None = None
    answers: dict[str, Any] | None = None
    checked: bool = False  # the rules read it (a file of a project may be summarized only)
    # Other files of the project read for the summaries this file's analysis asked about.
    fetched: dict[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Job:
    """What to do with every file of a run."""

    codes: tuple[str, ...]
    settings: Settings
    fix: bool = False
    unsafe: bool = False
    diff: bool = False  # compute fixes, write nothing
    with_edits: bool = False  # reporters that show fix edits need them
    unfixable: frozenset[str] = frozenset()  # codes whose fixes are dropped (`unfixable`)
