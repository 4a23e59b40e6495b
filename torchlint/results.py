"""Plain result types: what the linter finds, what a run asks for and gets back per file.

A leaf: it imports nothing of torchlint at run time, so the runner, the process pool,
the cache, the reporters and the notebook support all share these types without
importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from torchlint.settings import Settings


class Impact(str, Enum):
    """What acting on a finding gains, as the facts the analysis sees tell it: HIGH, or
    LOW where the pattern is real but the gain negligible (each rule's doc says when).
    Low-impact findings are shown only on request (`--show-low-impact`)."""

    HIGH = "high"
    LOW = "low"


# What a file's analysis asks its project (`Environment`, semantic/external.py): what a
# name imported from another file is, the names a star import binds, what the other files
# pass for a parameter and whether they always pass it, how they call a function, what
# they do with a site, whether they run a function (or any) on every step.
Kind = Literal[
    "export", "star", "param", "given", "numbers", "callers", "uses", "stepped", "any stepped"
]


@dataclass(frozen=True, order=True)
class Question:
    """One question a file asked its project: the key its answer is recorded under
    (`Environment.answers`). `subject`: the name as imported ("pkg.models.Net"), the
    module, the function of the file ("Trainer.fit") or the site ("#0"); `name`: the
    parameter (param, given)."""

    kind: Kind
    subject: str = ""
    name: str = ""


Answers = dict[Question, Any]  # each question asked, with its answer as plain data


def answers_to_json(answers: Answers) -> list[list[Any]]:
    """Answers as JSON (the cache's): [kind, subject, name, answer], by question."""
    return [[q.kind, q.subject, q.name, answers[q]] for q in sorted(answers)]


def answers_from_json(data: list[list[Any]]) -> Answers:
    """Answers read back from `answers_to_json` (TypeError or ValueError where `data` is
    not such a list)."""
    if not isinstance(data, list):
        raise TypeError(f"answers are a list, not {type(data).__name__}")
    return {Question(kind, subject, name): answer for kind, subject, name, answer in data}


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
    impact: str = Impact.HIGH.value  # an Impact's value


# Why a file (or a notebook cell) could not be checked, by the code its record carries
# in every report (as ruff reports `invalid-syntax` and E902 `io-error`). Not rules:
# they cannot be selected or ignored, and make the exit code 2.
INVALID_SYNTAX = "TL000"  # the text does not parse
IO_ERROR = "TL900"  # the file cannot be read or written (or is not a notebook)
ANALYSIS_ERROR = "TL901"  # valid code that could not be analysed or fixed
RULE_ERROR = "TL902"  # a local or installed rule raised (the others' findings are kept)
# A file not analysed (too large): a note in every report, neither a finding nor an error.
SKIPPED = "TL903"
# A rule (selected, ignored and fixed as any: rules/tl904_unused_noqa.py) whose findings
# the linter makes: the noqa codes that suppressed nothing.
UNUSED_NOQA = "TL904"
ERROR_NAMES = {
    INVALID_SYNTAX: "invalid-syntax",
    IO_ERROR: "io-error",
    ANALYSIS_ERROR: "analysis-error",
    RULE_ERROR: "rule-error",
}


@dataclass(frozen=True)
class FileError:
    """An error that stopped a file (or a cell) from being checked, where it happened."""

    code: str  # a key of ERROR_NAMES
    message: str
    line: int = 1
    column: int = 1
    cell: int | None = None  # notebooks: line and column are then in this cell

    def __str__(self) -> str:
        """As the command line prints it after the file's path."""
        if self.code == INVALID_SYNTAX:
            cell = f" in cell {self.cell}" if self.cell is not None else ""
            return f"syntax error{cell} at {self.line}:{self.column}: {self.message}"
        return f"cell {self.cell}: {self.message}" if self.cell is not None else self.message

    def record(self) -> Violation:
        """The error as reporters show a finding (a zero-width range at its position)."""
        message = f"SyntaxError: {self.message}" if self.code == INVALID_SYNTAX else self.message
        return Violation(
            self.code,
            ERROR_NAMES[self.code],
            message,
            self.line,
            self.column,
            self.line,
            self.column,
            cell=self.cell,
        )


@dataclass
class FileResult:
    """What happened to one file; plain data (picklable, cacheable)."""

    path: str  # as shown to the user
    violations: list[Violation] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
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
    answers: Answers | None = None
    checked: bool = False  # the rules read it (a file of a project may be summarized only)
    # Other files of the project read for the summaries this file's analysis asked about.
    fetched: dict[str, dict[str, Any]] | None = None
    # A cached result of a file of a project: the digest of its answers. Its summary and
    # answers are not stored with it but in the summaries' store, under its bytes (None
    # until read from there, where they are needed).
    stored: str | None = None

    @property
    def error(self) -> str | None:
        """The errors as one line, as the command line prints them; None when there are none."""
        return "; ".join(map(str, self.errors)) or None

    def records(self) -> list[Violation]:
        """What reports show for this file: its errors and its findings, by position; a
        note that it was skipped (`warning`), first."""
        skipped = [skip_record(self.warning)] if self.warning is not None else []
        if not self.errors:
            return [*skipped, *self.violations]
        found = [*(e.record() for e in self.errors), *self.violations]
        return [*skipped, *sorted(found, key=lambda v: (v.cell or 0, v.line, v.column))]


def skip_record(why: str) -> Violation:
    """A file not analysed, as reporters show a low-impact finding (a note) at line 1."""
    return Violation(SKIPPED, "file-skipped", why, 1, 1, 1, 1, impact="low")


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
    low_impact: bool = False  # low-impact findings are shown, so they carry their fixes
